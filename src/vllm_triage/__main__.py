from vllm_triage.cli import main

main()
