#!/usr/bin/env bash
# Makes sure the PostgreSQL, Redis (a server, and a three-primary cluster: scripts/redis-cluster.sh) and
# Kafka the tests use are up on this machine: starts them when installed but stopped, installs them when
# missing (PostgreSQL and Redis from Debian's packages, Kafka from Maven Central); and that Debian's
# Chromium is there for the browser tests. Idempotent; safe to run every time.
set -euo pipefail
script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

pg_up() { (echo > /dev/tcp/127.0.0.1/5432) 2>/dev/null; }
redis_up() { [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = "PONG" ]; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_updated=
apt_install() {
  [ -n "$apt_updated" ] || { as_root apt-get update -qq; apt_updated=1; }
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}
wait_for() { for _ in $(seq 1 60); do "$1" && return 0; sleep 0.5; done; echo "$2 did not come up" >&2; return 1; }

if ! pg_up; then
  if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
    echo "installing PostgreSQL"
    apt_install postgresql
  fi
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  echo "starting PostgreSQL $version"
  as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  wait_for pg_up PostgreSQL
fi
# Tests connect as postgres over TCP without a password (trust), as this machine kind is set up.
if ! psql -h 127.0.0.1 -U postgres -d postgres -Atqc 'select 1' >/dev/null 2>&1; then
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  hba=/etc/postgresql/$version/main/pg_hba.conf
  echo "allowing trust auth for local test connections in $hba"
  as_root sed -i -E 's/^(host\s+all\s+all\s+(127\.0\.0\.1\/32|::1\/128)\s+)\S+/\1trust/' "$hba"
  as_root pg_ctlcluster --skip-systemctl-redirect "$version" main reload
fi
psql -h 127.0.0.1 -U postgres -d postgres -Atqc "select 1 from pg_database where datname='test'" | grep -q 1 ||
  psql -h 127.0.0.1 -U postgres -d postgres -qc 'create database test'

# redis-cli (Debian's redis-tools) checks the server and joins the cluster nodes.
command -v redis-cli >/dev/null || apt_install redis-tools
if ! redis_up; then
  if ! command -v redis-server >/dev/null; then
    echo "installing Redis"
    apt_install redis-server
  fi
  echo "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no --dir /tmp
  wait_for redis_up Redis
fi
echo "PostgreSQL and Redis are up"

# The store contract suite also runs against a three-primary Redis Cluster on 127.0.0.1:7001-7003, started
# from the same redis-server; redis-cli joins the nodes.
bash "$script_dir/redis-cluster.sh"

# The web console's tests drive Debian's Chromium with playwright-core (no browser download works here).
if [ ! -x /usr/bin/chromium ]; then
  echo "installing Chromium for the browser tests"
  apt_install chromium
fi

# Kafka: a single-node KRaft broker (broker and controller in one JVM) on 127.0.0.1:9092, its controller
# on 127.0.0.1:9093. Neither npm nor Debian has a broker, so Apache Kafka's own jars come from Maven
# Central (scripts/kafka/pom.xml pins the version). Jars, configuration, data and logs live outside the
# checkout, in ${XDG_CACHE_HOME:-~/.cache}/svc/kafka/<version> (SVC_KAFKA_HOME overrides it); the log is
# logs/server.log there. KAFKA_HEAP_OPTS overrides the heap.
kafka_up() { (echo > /dev/tcp/127.0.0.1/9092) 2>/dev/null; }
kafka_pid_of() { # the pid in the pid file, if that process is still our broker
  local pid
  pid=$(cat "$1/broker.pid" 2>/dev/null) || return 1
  tr '\0' ' ' 2> /dev/null < "/proc/$pid/cmdline" | grep -q "kafka.Kafka $1/server.properties" && echo "$pid"
}

ensure_kafka() {
  local spec=$script_dir/kafka version home pid
  version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$spec/pom.xml")
  home=${SVC_KAFKA_HOME:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/svc/kafka/$version}
  mkdir -p "$home/logs"
  # One start at a time (two runs of this script at once); the broker itself must not inherit the lock.
  exec 9> "$home/.lock"
  flock 9
  if kafka_up; then exec 9>&-; return 0; fi

  if ! command -v java > /dev/null || ! command -v mvn > /dev/null; then
    echo "installing Java and Maven for the Kafka broker"
    apt_install maven default-jre-headless
  fi
  local java_version
  java_version=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
  if [ "${java_version%%.*}" -lt 17 ]; then
    echo "Kafka $version needs Java 17 or later, and java here is $java_version" >&2
    return 1
  fi

  # A broker of ours still starting (or hung): give it its chance first, then replace it.
  if pid=$(kafka_pid_of "$home"); then
    echo "waiting for the Kafka broker already starting (pid $pid)"
    if wait_for_kafka "$home" "$pid"; then exec 9>&-; return 0; fi
    stop_kafka "$pid"
  fi

  # The jars, fetched again only when the pom changes.
  local stamp
  stamp=$(sha256sum < "$spec/pom.xml" | cut -c1-16)
  if [ "$(cat "$home/libs/.pom" 2>/dev/null)" != "$stamp" ]; then
    echo "fetching Kafka $version from Maven Central into $home/libs"
    rm -rf "$home/libs" "$home/libs.partial"
    mvn -B -Dstyle.color=never -f "$spec/pom.xml" dependency:copy-dependencies \
      -DoutputDirectory="$home/libs.partial" > "$home/logs/fetch.log" 2>&1 ||
      { tail -n 40 "$home/logs/fetch.log" >&2; echo "fetching Kafka failed: $home/logs/fetch.log" >&2; return 1; }
    echo "$stamp" > "$home/libs.partial/.pom"
    mv "$home/libs.partial" "$home/libs"
  fi

  # The storage is formatted for one configuration: a new or changed one starts from empty storage
  # (test data only), under a fresh cluster id.
  { cat "$spec/server.properties"; echo "log.dirs=$home/data"; } > "$home/server.properties.next"
  cp "$spec/log4j2.properties" "$home/log4j2.properties"
  if ! cmp -s "$home/server.properties.next" "$home/server.properties" || [ ! -f "$home/data/meta.properties" ]; then
    echo "formatting the Kafka storage in $home/data"
    rm -rf "$home/data"
    mv "$home/server.properties.next" "$home/server.properties"
    local cluster_id
    cluster_id=$(java -cp "$home/libs/*" kafka.tools.StorageTool random-uuid)
    java -Dlog4j2.configurationFile="$home/log4j2.properties" -Dkafka.logs.dir="$home/logs/tools" \
      -cp "$home/libs/*" kafka.tools.StorageTool format --cluster-id "$cluster_id" \
      --config "$home/server.properties" > "$home/logs/format.log" 2>&1 ||
      { cat "$home/logs/format.log" >&2; return 1; }
  fi
  rm -f "$home/server.properties.next"

  echo "starting Kafka $version on 127.0.0.1:9092 (log: $home/logs/server.log)"
  # In a session of its own, so it outlives this script and its terminal; it writes its own pid (setsid
  # may fork, so $! need not be the broker).
  rm -f "$home/broker.pid"
  # shellcheck disable=SC2016,SC2086 # $$ is the broker's shell; KAFKA_HEAP_OPTS holds several options
  setsid bash -c 'echo $$ > "$0/broker.pid"; exec "$@"' "$home" \
    java ${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m} -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -XX:+ExitOnOutOfMemoryError \
    -Djava.awt.headless=true -Dlog4j2.configurationFile="$home/log4j2.properties" \
    -Dkafka.logs.dir="$home/logs" -cp "$home/libs/*" kafka.Kafka "$home/server.properties" \
    > "$home/logs/stdout.log" 2>&1 < /dev/null 9>&- &
  exec 9>&-
  for _ in $(seq 1 50); do [ -s "$home/broker.pid" ] && break; sleep 0.1; done
  pid=$(cat "$home/broker.pid" 2> /dev/null) || { kafka_failed "$home" "the Kafka broker did not start"; return 1; }
  if ! wait_for_kafka "$home" "$pid"; then
    stop_kafka "$pid"
    return 1
  fi
  echo "Kafka is up on 127.0.0.1:9092"
}

# Until the port answers and a client's request (a broker config lookup) is served.
wait_for_kafka() {
  local home=$1 pid=$2 deadline=$((SECONDS + 120))
  while :; do
    if ! kill -0 "$pid" 2> /dev/null; then
      kafka_failed "$home" "the Kafka broker (pid $pid) exited"
      return 1
    fi
    if kafka_up && timeout 30 java -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xmx128m \
      -Dlog4j2.configurationFile="$home/log4j2.properties" -Dkafka.logs.dir="$home/logs/tools" \
      -cp "$home/libs/*" kafka.admin.ConfigCommand --bootstrap-server 127.0.0.1:9092 \
      --describe --entity-type brokers --entity-name 1 > "$home/logs/check.log" 2>&1; then
      return 0
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      kafka_failed "$home" "the Kafka broker (pid $pid) did not serve requests on 127.0.0.1:9092 within 120 s"
      return 1
    fi
    sleep 0.5
  done
}

kafka_failed() {
  local home=$1
  {
    echo "$2. The end of its log, $home/logs/server.log:"
    tail -n 40 "$home/logs/server.log" 2> /dev/null || true
    if [ -s "$home/logs/stdout.log" ]; then
      echo "Its standard output and error, $home/logs/stdout.log:"
      tail -n 20 "$home/logs/stdout.log"
    fi
  } >&2
}

stop_kafka() {
  local pid=$1
  kill "$pid" 2> /dev/null || return 0
  for _ in $(seq 1 40); do kill -0 "$pid" 2> /dev/null || return 0; sleep 0.5; done
  kill -9 "$pid" 2> /dev/null || true
}

if kafka_up; then
  echo "Kafka is up on 127.0.0.1:9092"
else
  ensure_kafka
fi
