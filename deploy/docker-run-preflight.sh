#!/usr/bin/env bash
# docker-run-preflight.sh: `vllm-triage preflight` first, then the real `docker run` only on a go.
#
#   deploy/docker-run-preflight.sh [PREFLIGHT OPTIONS] -- [DOCKER RUN ARGUMENTS]
#
# For example, on the node itself:
#
#   deploy/docker-run-preflight.sh --image vllm/vllm-openai:kimi-k3 --recipe kimi-k3 \
#       --model-path /data/models/Kimi-K3 -- \
#       --gpus all --ipc=host -v /data/models:/models:ro vllm/vllm-openai:kimi-k3 \
#       /models/Kimi-K3 --trust-remote-code -tp 8 --enable-prefix-caching
#
# Every argument after `--` reaches docker exactly as given ("$@"; nothing is evaluated). What the
# docker arguments say is added to preflight's options unless they are given already:
#   --launch-cmd -     the docker command itself, on preflight's standard input
#   --shm-size SIZE    docker's --shm-size; Docker's default 64m without it; nothing with
#                      --ipc=host (the container shares the host's /dev/shm, which is measured)
#   --container-user   docker's --user / -u when it is numeric (UID[:GID])
# Exit status: docker's own on a go; on a no-go preflight's 1, on bad input its 2, and docker is
# not run. VLLM_TRIAGE (default: vllm-triage) and DOCKER (default: docker) name the programs.
set -euo pipefail

me=${0##*/}
triage=${VLLM_TRIAGE:-vllm-triage}
docker=${DOCKER:-docker}

usage() {
    echo "usage: $me [PREFLIGHT OPTIONS] -- [DOCKER RUN ARGUMENTS]" >&2
    exit 2
}

preflight=()
separated=""
while [ $# -gt 0 ]; do
    if [ "$1" = "--" ]; then
        separated=1
        shift
        break
    fi
    preflight+=("$1")
    shift
done
[ -n "$separated" ] && [ $# -gt 0 ] || usage
run=("$@")

# Whether preflight's options already name this option (`--opt value` or `--opt=value`).
given() {
    local name=$1 option
    shift
    for option in "$@"; do
        case $option in
            "$name" | "$name"=*) return 0 ;;
        esac
    done
    return 1
}

# What the docker arguments say about /dev/shm and the user.
shm="" ipc_host="" user=""
count=${#run[@]}
for ((i = 0; i < count; i++)); do
    next=${run[i + 1]:-}
    case ${run[i]} in
        --shm-size=*) shm=${run[i]#--shm-size=} ;;
        --shm-size) shm=$next ;;
        --ipc=host) ipc_host=1 ;;
        --ipc) [ "$next" = host ] && ipc_host=1 ;;
        --user=*) user=${run[i]#--user=} ;;
        --user | -u) user=$next ;;
    esac
done

extra=()
if ! given --shm-size ${preflight[@]+"${preflight[@]}"}; then
    if [ -n "$shm" ]; then
        extra+=(--shm-size "$shm")
    elif [ -z "$ipc_host" ]; then
        extra+=(--shm-size 64m)
    fi
fi
if ! given --container-user ${preflight[@]+"${preflight[@]}"} &&
    [[ $user =~ ^[0-9]+(:[0-9]+)?$ ]]; then
    extra+=(--container-user "$user")
fi

status=0
if given --launch-cmd ${preflight[@]+"${preflight[@]}"}; then
    "$triage" preflight ${preflight[@]+"${preflight[@]}"} ${extra[@]+"${extra[@]}"} ||
        status=$?
else
    # The docker command as shell words (printf %q quotes each), for preflight to read.
    launch=$(printf '%q ' "$docker" run "${run[@]}")
    "$triage" preflight ${preflight[@]+"${preflight[@]}"} ${extra[@]+"${extra[@]}"} \
        --launch-cmd - <<<"$launch" || status=$?
fi

case $status in
    0) exec "$docker" run "${run[@]}" ;;
    1)
        echo "$me: preflight says no-go: the container was not started" >&2
        exit 1
        ;;
    *)
        echo "$me: preflight failed (exit $status): the container was not started" >&2
        exit "$status"
        ;;
esac
