# The Kimi K3 launch command, without --enable-prefix-caching
vllm serve moonshotai/Kimi-K3 \
  --tensor-parallel-size 8 \
  --trust-remote-code \
  --enable-auto-tool-choice --tool-call-parser kimi_k3 \
  --reasoning-parser kimi_k3
