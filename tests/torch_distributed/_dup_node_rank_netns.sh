#!/usr/bin/env bash
# One-off provenance run for multinode-rank-matrix.md "Same node rank on two hosts" (torch 2.13.0):
# two real torchrun agents, both --node-rank 0, in two network namespaces joined by a veth pair, so each
# agent's TCPStore server binds the port on its own "host" (no EADDRINUSE). Needs unprivileged user
# namespaces: run as   unshare -rn bash tests/torch_distributed/_dup_node_rank_netns.sh PYTHON TRAIN_PY
# Result (2026-12-07): both agents exit 1 after ~9 s with
#   [c10d] waitForInput: poll for socket ... returned 0, likely a timeout
#   torch.distributed.DistStoreError: wait timeout after 8000ms, keys: /none/torchelastic/role_info/0, /none/torchelastic/role_info/1
# raised in agent/server/api.py _assign_worker_ranks (store.multi_get). The portable test is
# test_duplicate_node_rank_two_hosts.py. Port 29611 is fixed: the namespaces are private to this run.
set -e
PY=${1:?python}; TRAIN=${2:?train.py}
ip link set lo up
unshare -n sleep 120 & BPID=$!
sleep 0.5
ip link add vA type veth peer name vB netns $BPID
ip addr add 10.9.0.1/24 dev vA; ip link set vA up
nsenter -t $BPID -n sh -c 'ip link set lo up; ip addr add 10.9.0.2/24 dev vB; ip link set vB up'
ARGS="--nnodes 2 --nproc-per-node 1 --master-addr 10.9.0.1 --master-port 29611 --node-rank 0 --rdzv-conf timeout=8"
( $PY -m torch.distributed.run $ARGS $TRAIN > A.log 2>&1; echo "A rc=$?" >> A.log ) &
sleep 1
nsenter -t $BPID -n --preserve-credentials sh -c "$PY -m torch.distributed.run $ARGS $TRAIN > B.log 2>&1; echo B rc=\$? >> B.log" || true
wait
kill $BPID 2>/dev/null || true
