# syntax=docker/dockerfile:1
# One image for every service: the runner (apps/server) compiled to JavaScript, started with the target to
# run, the way Grafana Loki's single binary runs `-target=…`:
#
#   docker build -t svc-server .
#   docker run --rm -p 8080:8080 -v svc-state:/var/lib/svc svc-server            # --target all: the whole network on a devnet
#   docker run --rm svc-server --target gateway                                   # one service, as the Helm chart runs it
#   docker run --rm -e DATABASE_URL=… svc-server --target migrate                  # the key-service's migrations, then exit
#
# Why one image and not one per service: docs/operations.md ("One image").

ARG NODE_IMAGE=node:20.19-bookworm
ARG NODE_RUNTIME_IMAGE=node:20.19-bookworm-slim

# --- build: the whole workspace from the lockfile, every package compiled to dist/ -----------------------
FROM ${NODE_IMAGE} AS build
# The full Debian image: c-kzg compiles its native addon (python3, make, g++) during the install.
WORKDIR /src
# The npm the repository pins (package.json `packageManager`).
RUN npm install --global --no-audit --no-fund npm@11.19.1
COPY . .
# `npm install`, not `npm ci`: the lockfile lacks some other platforms' optional packages (docs/development.md).
# The root postinstall generates the Prisma client (not committed).
RUN --mount=type=cache,target=/root/.npm \
    npm install --no-audit --no-fund
# tsc emits dist/ for every package (turbo runs each package's `generate` first: protobuf code, contract
# artifacts, the Prisma client, the web console's build).
RUN npm run build
# Production dependencies only, then the runtime tree: each workspace's package.json, its dist/ and its own
# node_modules, the key-service's SQL migrations and the console's build; no sources, no TypeScript.
RUN npm prune --omit=dev --no-audit --no-fund \
 && mkdir -p /out \
 && cp -a package.json node_modules /out/ \
 && for workspace in apps/server apps/console packages/* services/*; do \
      mkdir -p "/out/$workspace" && cp "$workspace/package.json" "/out/$workspace/" \
      && if [ -d "$workspace/dist" ]; then cp -a "$workspace/dist" "/out/$workspace/"; fi \
      && if [ -d "$workspace/node_modules" ]; then cp -a "$workspace/node_modules" "/out/$workspace/"; fi; \
    done \
 && mkdir -p /out/services/key-service/prisma \
 && cp -a services/key-service/prisma/migrations /out/services/key-service/prisma/ \
 && test -f /out/apps/server/dist/main.js \
 && test -f /out/apps/console/dist/index.html \
 && test -d /out/services/key-service/dist/gen/prisma

# --- runtime: compiled JavaScript and production dependencies, run as `node` ----------------------------
FROM ${NODE_RUNTIME_IMAGE} AS runtime
ENV NODE_ENV=production \
    STATE_DIR=/var/lib/svc \
    GRPC_HOST=0.0.0.0 \
    METRICS_HOST=0.0.0.0 \
    HEALTH_HOST=0.0.0.0
# Owned by root and run as `node`: the process cannot change its own code, and the root filesystem may be
# read-only. The only writable places are volumes: STATE_DIR (the embedded database and devnet of
# `--target all`, a worker's DATA_DIR) and /tmp.
COPY --from=build /out /app
RUN mkdir -p /var/lib/svc && chown node:node /var/lib/svc
VOLUME ["/var/lib/svc"]
WORKDIR /app
USER node
# gateway HTTP and metrics, gRPC (key-service, job-orchestrator and its worker link, payment-settler),
# a worker's health and metrics.
EXPOSE 8080 9465 50051 9464
# SIGTERM drains: each service finishes or hands over what is in flight, then exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "/app/apps/server/dist/main.js"]
CMD ["--target", "all"]
