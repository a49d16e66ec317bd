#!/usr/bin/env bash
# Makes sure the local three-primary Redis Cluster the store tests run against is up: redis-server in
# cluster mode on 127.0.0.1:7001-7003 (no persistence, no replicas), joined into one cluster owning all
# 16384 slots. Idempotent: a cluster that is up and whole is left alone; nodes that are down are started;
# nodes that run but never met are joined, and a cluster that lost a node is rebuilt empty (test data
# only). Their dirs (nodes.conf, logs) live outside the checkout, in
# ${XDG_CACHE_HOME:-~/.cache}/svc/redis-cluster (SVC_REDIS_CLUSTER_HOME overrides it). Needs Debian's
# redis-server and redis-tools (redis-cli), installed by scripts/ensure-services.sh, which calls this.
# The tests reach it as REDIS_CLUSTER_URL=redis+cluster://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003.
set -euo pipefail

ports=(7001 7002 7003)
home=${SVC_REDIS_CLUSTER_HOME:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/svc/redis-cluster}

for tool in redis-server redis-cli; do
  command -v "$tool" > /dev/null ||
    { echo "$tool is missing: run scripts/ensure-services.sh (installs Debian's redis-server)" >&2; exit 1; }
done

node_up() { [ "$(redis-cli -h 127.0.0.1 -p "$1" ping 2> /dev/null)" = "PONG" ]; }
# Every node answers, and each one sees a cluster of all of them owning every slot (a node that just
# stopped still looks fine to the others until the node timeout, so each is asked itself).
cluster_whole() {
  local port info
  for port in "${ports[@]}"; do
    info=$(redis-cli -h 127.0.0.1 -p "$port" cluster info 2> /dev/null) || return 1
    grep -q '^cluster_state:ok' <<< "$info" || return 1
    grep -q "^cluster_known_nodes:${#ports[@]}\b" <<< "$info" || return 1
  done
}

mkdir -p "$home"
# One start at a time (two runs of this script at once); the servers must not inherit the lock.
exec 9> "$home/.lock"
flock 9

if cluster_whole; then
  echo "Redis Cluster is up on 127.0.0.1:${ports[0]}-${ports[-1]}"
  exit 0
fi

for port in "${ports[@]}"; do
  node_up "$port" && continue
  dir=$home/$port
  # A node that stopped forgets its data (no persistence), so its old nodes.conf would name slots and
  # peers it no longer has: start it from scratch; the cluster is rebuilt below.
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "starting a Redis Cluster node on 127.0.0.1:$port (dir: $dir)"
  redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --dir "$dir" \
    --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 5000 \
    --save '' --appendonly no --logfile "$dir/redis.log" --pidfile "$dir/redis.pid" 9>&-
done
for port in "${ports[@]}"; do
  for _ in $(seq 1 60); do node_up "$port" && break; sleep 0.25; done
  node_up "$port" || { echo "Redis Cluster node 127.0.0.1:$port did not come up: $home/$port/redis.log" >&2; exit 1; }
done

if ! cluster_whole; then
  # Leftovers of an earlier, partial cluster (a node restarted alone) are reset, so the nodes join afresh.
  for port in "${ports[@]}"; do
    redis-cli -h 127.0.0.1 -p "$port" flushall > /dev/null
    redis-cli -h 127.0.0.1 -p "$port" cluster reset hard > /dev/null
  done
  echo "joining 127.0.0.1:${ports[0]}-${ports[-1]} into one cluster (three primaries, no replicas)"
  redis-cli --cluster create "${ports[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes > "$home/create.log" 2>&1 ||
    { cat "$home/create.log" >&2; exit 1; }
  for _ in $(seq 1 60); do cluster_whole && break; sleep 0.25; done
  cluster_whole || { echo "the Redis Cluster did not reach cluster_state:ok (see $home/create.log)" >&2; exit 1; }
fi
echo "Redis Cluster is up on 127.0.0.1:${ports[0]}-${ports[-1]}"
