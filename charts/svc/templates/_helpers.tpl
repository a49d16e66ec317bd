{{/*
Names, labels, images and the environment of each component. Every component runs the same image with
its own `--target`; the environment wired here is the part of docs/configuration.md a cluster cannot
leave to its default (addresses, ports bound on every interface, the shared dependencies, secrets).
*/}}

{{- define "svc.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "svc.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "svc.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The name of a component's resources: <fullname>-<target>. Call with (dict "root" $ "component" "gateway"). */}}
{{- define "svc.componentName" -}}
{{- printf "%s-%s" (include "svc.fullname" .root | trunc 45 | trimSuffix "-") .component -}}
{{- end -}}

{{- define "svc.selectorLabels" -}}
app.kubernetes.io/name: {{ include "svc.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- end -}}

{{/* Labels of every resource; (dict "root" $ "component" "<target>" or ""). */}}
{{- define "svc.labels" -}}
helm.sh/chart: {{ include "svc.chart" .root }}
{{ include "svc.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: {{ include "svc.name" .root }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* metadata.annotations of every resource, with extra ones, on a line of its own (nothing when there are none). (dict "root" $ "extra" map) */}}
{{- define "svc.annotations" -}}
{{- $all := merge (deepCopy (default dict .extra)) (default dict .root.Values.commonAnnotations) -}}
{{- with $all -}}
{{- printf "\n  annotations:\n%s" (toYaml . | indent 4) -}}
{{- end -}}
{{- end -}}

{{/* The image reference of a component: its own fields, else global.image's. (dict "root" $ "image" .Values.<c>.image) */}}
{{- define "svc.image" -}}
{{- $global := .root.Values.global.image -}}
{{- $repository := default $global.repository .image.repository -}}
{{- /* A trailing "@" is an empty digest (skaffold's `tag@digest` template for an image it did not push). */ -}}
{{- $tag := default (default .root.Chart.AppVersion $global.tag) .image.tag | trimSuffix "@" -}}
{{- $digest := default $global.digest .image.digest -}}
{{- if and $digest (not (contains "@" $tag)) -}}
{{- printf "%s:%s@%s" $repository $tag $digest -}}
{{- else -}}
{{- printf "%s:%s" $repository $tag -}}
{{- end -}}
{{- end -}}

{{- define "svc.imagePullPolicy" -}}
{{- default .root.Values.global.image.pullPolicy .image.pullPolicy -}}
{{- end -}}

{{- define "svc.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "svc.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* PUBLIC_URL: publicUrl, else the first Ingress host (https when a TLS entry names it). */}}
{{- define "svc.publicUrl" -}}
{{- if .Values.publicUrl -}}
{{- .Values.publicUrl -}}
{{- else if and .Values.ingress.enabled .Values.ingress.hosts -}}
{{- $host := (index .Values.ingress.hosts 0).host -}}
{{- $scheme := "http" -}}
{{- range .Values.ingress.tls -}}
{{- if has $host (default list .hosts) -}}{{- $scheme = "https" -}}{{- end -}}
{{- end -}}
{{- printf "%s://%s" $scheme $host -}}
{{- end -}}
{{- end -}}

{{/* host:port of a component's gRPC Service inside the cluster. (dict "root" $ "component" "key-service" "port" 50051) */}}
{{- define "svc.grpcAddress" -}}
{{- printf "%s.%s.svc:%v" (include "svc.componentName" .) .root.Release.Namespace .port -}}
{{- end -}}

{{/*
The secret groups: which Secret key holds which setting, which component reads it, and whether the
setting must be in an existing Secret. The settings every component treats as secret are listed in
svc.secretSettings; the deployment tests check both lists against the services' configuration shapes.
*/}}
{{- define "svc.secretGroups" -}}
gatewayServiceToken:
  name: gateway-service-token
  component: gateway
  fields:
    - { field: privateKey, env: SERVICE_TOKEN_PRIVATE_KEY, required: true }
jobOrchestratorServiceToken:
  name: job-orchestrator-service-token
  component: jobOrchestrator
  fields:
    - { field: privateKey, env: SERVICE_TOKEN_PRIVATE_KEY, required: true }
signin:
  name: signin
  component: keyService
  fields:
    - { field: signingKey, env: SIGNIN_TOKEN_SIGNING_KEY, required: true }
    - { field: signingKeyId, env: SIGNIN_TOKEN_SIGNING_KEY_ID, required: false }
    - { field: verificationKeys, env: SIGNIN_TOKEN_VERIFICATION_KEYS, required: false }
    - { field: apiKeyPepper, env: API_KEY_PEPPER, required: true }
signer:
  name: signer
  component: jobOrchestrator
  fields:
    - { field: privateKey, env: SERVICE_SIGNER_PRIVATE_KEY, required: true }
    - { field: blobOperatorKeys, env: BLOB_OPERATOR_PRIVATE_KEYS, required: false }
    - { field: plainOperatorKeys, env: PLAIN_OPERATOR_PRIVATE_KEYS, required: false }
facilitator:
  name: facilitator
  component: paymentSettler
  fields:
    - { field: privateKey, env: FACILITATOR_PRIVATE_KEY, required: true }
    - { field: operatorKeys, env: FACILITATOR_OPERATOR_PRIVATE_KEYS, required: false }
worker:
  name: worker
  component: worker
  fields:
    - { field: keystorePassword, env: KEYSTORE_PASSWORD, required: true }
    - { field: privateKey, env: WORKER_PRIVATE_KEY, required: false }
    - { field: upstreamApiKey, env: UPSTREAM_API_KEY, required: false }
{{- end -}}

{{/* Settings that only ever come from a Secret: `env` may not set them as plain values. */}}
{{- define "svc.secretSettings" -}}
- DATABASE_URL
- REDIS_URL
- KAFKA_SASL_PASSWORD
- SERVICE_TOKEN_PRIVATE_KEY
- SIGNIN_TOKEN_SIGNING_KEY
- API_KEY_PEPPER
- SERVICE_SIGNER_PRIVATE_KEY
- BLOB_OPERATOR_PRIVATE_KEYS
- PLAIN_OPERATOR_PRIVATE_KEYS
- FACILITATOR_PRIVATE_KEY
- FACILITATOR_OPERATOR_PRIVATE_KEYS
- WORKER_PRIVATE_KEY
- KEYSTORE_PASSWORD
- UPSTREAM_API_KEY
{{- end -}}

{{/* Whether a secret group has inline values for the chart to keep in a Secret of its own. (dict "root" $ "group" "signin") */}}
{{- define "svc.secretGroupInline" -}}
{{- $spec := index (include "svc.secretGroups" .root | fromYaml) .group -}}
{{- $values := index .root.Values.secrets .group -}}
{{- range $spec.fields -}}
{{- if index $values .field -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/* The environment a secret group gives its component, as a map of setting to entry; "envs" keeps only those settings. (dict "root" $ "group" "signin" ["envs" list]) */}}
{{- define "svc.secretGroupEnv" -}}
{{- $root := .root -}}
{{- $spec := index (include "svc.secretGroups" $root | fromYaml) .group -}}
{{- $values := index $root.Values.secrets .group -}}
{{- $env := dict -}}
{{- $only := .envs -}}
{{- if $values.existingSecret -}}
{{- range $spec.fields -}}
{{- if or (not $only) (has .env $only) -}}
{{- $ref := dict "name" $values.existingSecret "key" (index $values.keys .field) -}}
{{- if not .required -}}{{- $_ := set $ref "optional" true -}}{{- end -}}
{{- $_ := set $env .env (dict "valueFrom" (dict "secretKeyRef" $ref)) -}}
{{- end -}}
{{- end -}}
{{- else -}}
{{- $name := include "svc.componentName" (dict "root" $root "component" $spec.name) -}}
{{- range $spec.fields -}}
{{- if and (index $values .field) (or (not $only) (has .env $only)) -}}
{{- $_ := set $env .env (dict "valueFrom" (dict "secretKeyRef" (dict "name" $name "key" (index $values.keys .field)))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $env -}}
{{- end -}}

{{/*
Who may call a gRPC server (key-service, job-orchestrator, payment-settler), as a map of setting to entry:
SERVICE_TOKEN_CALLER_KEYS from the calling services' public keys, SERVICE_TOKEN_INTERNAL_CALLERS from the
internal callers (each service takes the methods of its own gRPC services). (dict "root" $)
*/}}
{{- define "svc.serviceTokenCallersEnv" -}}
{{- $t := .root.Values.serviceTokens -}}
{{- $entries := list -}}
{{- range $t.publicKeys.gateway }}{{- $entries = append $entries (printf "gateway=%s" .) -}}{{- end -}}
{{- range $t.publicKeys.jobOrchestrator }}{{- $entries = append $entries (printf "job-orchestrator=%s" .) -}}{{- end -}}
{{- $env := dict -}}
{{- if $entries -}}
{{- $_ := set $env "SERVICE_TOKEN_CALLER_KEYS" (dict "value" (join "," $entries)) -}}
{{- end -}}
{{- with $t.internalCallers -}}
{{- $_ := set $env "SERVICE_TOKEN_INTERNAL_CALLERS" (dict "value" (toJson .)) -}}
{{- end -}}
{{- toYaml $env -}}
{{- end -}}

{{/* A connection URL kept in a Secret (postgresql, redis) or a plain/secret RPC URL, as a map of setting to entry. */}}
{{- define "svc.connectionEnv" -}}
{{- $root := .root -}}
{{- $env := dict -}}
{{- $connections := include "svc.componentName" (dict "root" $root "component" "connections") -}}
{{- if .postgresql -}}
{{- with $root.Values.postgresql -}}
{{- if .existingSecret -}}
{{- $_ := set $env "DATABASE_URL" (dict "valueFrom" (dict "secretKeyRef" (dict "name" .existingSecret "key" .existingSecretKey))) -}}
{{- else if .url -}}
{{- $_ := set $env "DATABASE_URL" (dict "valueFrom" (dict "secretKeyRef" (dict "name" $connections "key" "DATABASE_URL"))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if .redis -}}
{{- with $root.Values.redis -}}
{{- if .existingSecret -}}
{{- $_ := set $env "REDIS_URL" (dict "valueFrom" (dict "secretKeyRef" (dict "name" .existingSecret "key" .existingSecretKey))) -}}
{{- else if .url -}}
{{- $_ := set $env "REDIS_URL" (dict "valueFrom" (dict "secretKeyRef" (dict "name" $connections "key" "REDIS_URL"))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if .chain -}}
{{- with $root.Values.chain -}}
{{- if .existingSecret -}}
{{- $_ := set $env "RPC_URL" (dict "valueFrom" (dict "secretKeyRef" (dict "name" .existingSecret "key" .existingSecretKey))) -}}
{{- else if .rpcUrl -}}
{{- $_ := set $env "RPC_URL" (dict "value" .rpcUrl) -}}
{{- end -}}
{{- with .chainId }}{{- $_ := set $env "CHAIN_ID" (dict "value" .) -}}{{- end -}}
{{- with .jobRegistryAddress }}{{- $_ := set $env "JOB_REGISTRY_ADDRESS" (dict "value" .) -}}{{- end -}}
{{- with .workerRegistryAddress }}{{- $_ := set $env "WORKER_REGISTRY_ADDRESS" (dict "value" .) -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- if .kafka -}}
{{- with $root.Values.kafka -}}
{{- with .brokers }}{{- $_ := set $env "KAFKA_BROKERS" (dict "value" .) -}}{{- end -}}
{{- if .ssl }}{{- $_ := set $env "KAFKA_SSL" (dict "value" "true") -}}{{- end -}}
{{- with .publishTimeout }}{{- $_ := set $env "KAFKA_PUBLISH_TIMEOUT" (dict "value" (toString .)) -}}{{- end -}}
{{- $topics := dict "replicationFactor" "KAFKA_TOPIC_REPLICATION_FACTOR" "minInsyncReplicas" "KAFKA_TOPIC_MIN_INSYNC_REPLICAS" "jobLifecyclePartitions" "KAFKA_JOB_LIFECYCLE_PARTITIONS" "jobLifecycleRetention" "KAFKA_JOB_LIFECYCLE_RETENTION" "keyEventsPartitions" "KAFKA_KEY_EVENTS_PARTITIONS" "keyEventsRetention" "KAFKA_KEY_EVENTS_RETENTION" -}}
{{- range $field, $setting := $topics -}}
{{- $value := index $root.Values.kafka.topics $field -}}
{{- if or (kindIs "float64" $value) (kindIs "int64" $value) $value -}}
{{- $_ := set $env $setting (dict "value" $value) -}}
{{- end -}}
{{- end -}}
{{- if ne .sasl.mechanism "none" -}}
{{- $_ := set $env "KAFKA_SASL_MECHANISM" (dict "value" .sasl.mechanism) -}}
{{- with .sasl.username }}{{- $_ := set $env "KAFKA_SASL_USERNAME" (dict "value" .) -}}{{- end -}}
{{- if .sasl.existingSecret -}}
{{- $_ := set $env "KAFKA_SASL_PASSWORD" (dict "valueFrom" (dict "secretKeyRef" (dict "name" .sasl.existingSecret "key" .sasl.existingSecretKey))) -}}
{{- else if .sasl.password -}}
{{- $_ := set $env "KAFKA_SASL_PASSWORD" (dict "valueFrom" (dict "secretKeyRef" (dict "name" $connections "key" "KAFKA_SASL_PASSWORD"))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $env -}}
{{- end -}}

{{/*
What every component reads from the runner: logging, local state, for gRPC services the bound address,
the metrics listener, the trace collector (when `tracing.otlpEndpoint` is set), and how long a stopping process waits for its services: 5 s below the pod's grace
period, so it exits cleanly before the kubelet kills it.
(dict "root" $ "grpcPort" 50051 "metricsPort" 9465 "gracePeriod" 30; each may be left out)
*/}}
{{- define "svc.runnerEnv" -}}
{{- $env := dict "LOG_LEVEL" (dict "value" .root.Values.global.logLevel) "STATE_DIR" (dict "value" .root.Values.stateDir) -}}
{{- if .store -}}
{{- $_ := set $env "STORE_NAMESPACE" (dict "value" .root.Values.global.storeNamespace) -}}
{{- end -}}
{{- if .grpcPort -}}
{{- $_ := set $env "GRPC_HOST" (dict "value" "0.0.0.0") -}}
{{- $_ := set $env "GRPC_PORT" (dict "value" (toString .grpcPort)) -}}
{{- end -}}
{{- if .gracePeriod -}}
{{- $_ := set $env "SHUTDOWN_TIMEOUT" (dict "value" (printf "%ds" (max 1 (sub (int .gracePeriod) 5)))) -}}
{{- end -}}
{{- if .metricsPort -}}
{{- $_ := set $env "METRICS_HOST" (dict "value" "0.0.0.0") -}}
{{- $_ := set $env "METRICS_PORT" (dict "value" (toString .metricsPort)) -}}
{{- end -}}
{{- if .root.Values.tracing.otlpEndpoint -}}
{{- $_ := set $env "OTEL_EXPORTER_OTLP_ENDPOINT" (dict "value" .root.Values.tracing.otlpEndpoint) -}}
{{- end -}}
{{- toYaml $env -}}
{{- end -}}

{{/*
A component's metrics on a ClusterIP Service of their own, never behind a public Service or the Ingress,
labelled for the release's ServiceMonitor. (dict "root" $ "component" "gateway" "values" .Values.gateway)
*/}}
{{- define "svc.metricsService" -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "svc.componentName" . }}-metrics
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "svc.labels" . | nindent 4 }}
    svc.metrics/scrape: "true"
  {{- include "svc.annotations" (dict "root" .root) }}
spec:
  type: ClusterIP
  selector:
    {{- include "svc.selectorLabels" . | nindent 4 }}
  ports:
    - name: metrics
      port: {{ .values.metrics.port }}
      targetPort: metrics
      protocol: TCP
{{- end -}}

{{/*
The container's env list: the wired settings, then the component's `env` over them (refusing plain
values for secret settings), sorted by name, then `extraEnv` as given. (dict "root" $ "wired" map "values" .Values.<c> "component" "gateway")
*/}}
{{- define "svc.envList" -}}
{{- $all := deepCopy .wired -}}
{{- $secretSettings := include "svc.secretSettings" .root | fromYamlArray -}}
{{- $component := .component -}}
{{- $overrides := merge (deepCopy (default dict .values.env)) (default dict .root.Values.global.env) -}}
{{- range $name, $value := $overrides -}}
{{- if has $name $secretSettings -}}
{{- fail (printf "%s.env (or global.env).%s: %s is a secret; give it through the chart's secret values or an existing Secret (extraEnv with valueFrom works too)" $component $name $name) -}}
{{- end -}}
{{- $_ := set $all $name (dict "value" $value) -}}
{{- end -}}
{{- range $name := keys $all | sortAlpha }}
{{- $entry := index $all $name }}
- name: {{ $name }}
{{- if hasKey $entry "value" }}
  value: {{ include "svc.envValue" $entry.value | quote }}
{{- else }}
  valueFrom:
    {{- toYaml $entry.valueFrom | nindent 4 }}
{{- end }}
{{- end }}
{{- with .values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* An environment value as text: whole numbers without an exponent (YAML numbers arrive as floats). */}}
{{- define "svc.envValue" -}}
{{- if and (kindIs "float64" .) (eq (floor .) .) -}}
{{- printf "%.0f" . -}}
{{- else -}}
{{- toString . -}}
{{- end -}}
{{- end -}}

{{/* A probe: (dict "probe" .Values.<c>.probes.<kind> "grpc" port "service" name) or (dict "probe" … "http" path "port" name). */}}
{{- define "svc.probe" -}}
{{- if .grpc -}}
grpc:
  port: {{ .grpc }}
  {{- if .service }}
  service: {{ .service | quote }}
  {{- end }}
{{- else -}}
httpGet:
  path: {{ .http }}
  port: {{ .port }}
{{- end }}
periodSeconds: {{ .probe.periodSeconds }}
timeoutSeconds: {{ .probe.timeoutSeconds }}
failureThreshold: {{ .probe.failureThreshold }}
{{- end -}}

{{/* Pod-level settings shared by every workload. (dict "root" $ "values" .Values.<c>) */}}
{{- define "svc.podSettings" -}}
serviceAccountName: {{ include "svc.serviceAccountName" .root }}
automountServiceAccountToken: {{ .root.Values.serviceAccount.automountServiceAccountToken }}
{{- with .root.Values.global.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
terminationGracePeriodSeconds: {{ .values.terminationGracePeriodSeconds }}
{{- with .values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The writable directories of a read-only root filesystem. */}}
{{- define "svc.scratchVolumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.tmpDirSizeLimit }}
- name: state
  emptyDir: {}
{{- end -}}

{{- define "svc.scratchMounts" -}}
- name: tmp
  mountPath: /tmp
- name: state
  mountPath: {{ .Values.stateDir }}
{{- end -}}

{{/* Pod annotations: the component's, and a checksum of the Secrets the chart creates so pods restart when they change. */}}
{{- define "svc.podAnnotations" -}}
{{- $annotations := deepCopy (default dict .values.podAnnotations) -}}
{{- $_ := set $annotations "checksum/secrets" (include (print .root.Template.BasePath "/secrets.yaml") .root | sha256sum) -}}
{{- toYaml $annotations -}}
{{- end -}}

{{/* HorizontalPodAutoscaler of a workload. (dict "root" $ "component" "gateway" "values" .Values.gateway "kind" "Deployment") */}}
{{- define "svc.hpa" -}}
{{- $a := .values.autoscaling -}}
{{- if $a.enabled }}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "svc.componentName" . }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "svc.labels" . | nindent 4 }}
  {{- include "svc.annotations" (dict "root" .root) }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: {{ .kind }}
    name: {{ include "svc.componentName" . }}
  minReplicas: {{ $a.minReplicas }}
  maxReplicas: {{ $a.maxReplicas }}
  metrics:
    {{- if $a.targetCPUUtilizationPercentage }}
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ $a.targetCPUUtilizationPercentage }}
    {{- end }}
    {{- if $a.targetMemoryUtilizationPercentage }}
    - type: Resource
      resource:
        name: memory
        target:
          type: Utilization
          averageUtilization: {{ $a.targetMemoryUtilizationPercentage }}
    {{- end }}
  {{- with $a.behavior }}
  behavior:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end -}}

{{/* PodDisruptionBudget of a workload. (dict "root" $ "component" "gateway" "values" .Values.gateway) */}}
{{- define "svc.pdb" -}}
{{- $p := .values.pdb -}}
{{- if $p.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "svc.componentName" . }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "svc.labels" . | nindent 4 }}
  {{- include "svc.annotations" (dict "root" .root) }}
spec:
  {{- if not (kindIs "string" $p.minAvailable) }}
  minAvailable: {{ $p.minAvailable }}
  {{- else if $p.minAvailable }}
  minAvailable: {{ $p.minAvailable }}
  {{- else }}
  maxUnavailable: {{ $p.maxUnavailable }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "svc.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end -}}
