{{/*
Values that contradict each other (always refused), and settings a component cannot start or serve
without (listed by NOTES.txt; refused when global.strictValidation is true).
*/}}

{{- define "svc.contradictions" -}}
{{- $root := . -}}
{{- $problems := list -}}
{{- range $block := list "postgresql" "redis" -}}
{{- $v := index $root.Values $block -}}
{{- if and $v.url $v.existingSecret -}}
{{- $problems = append $problems (printf "%s.url and %s.existingSecret are both set: keep one" $block $block) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.kafka.sasl.password .Values.kafka.sasl.existingSecret -}}
{{- $problems = append $problems "kafka.sasl.password and kafka.sasl.existingSecret are both set: keep one" -}}
{{- end -}}
{{- if and .Values.chain.rpcUrl .Values.chain.existingSecret -}}
{{- $problems = append $problems "chain.rpcUrl and chain.existingSecret are both set: keep one" -}}
{{- end -}}
{{- range $group, $spec := include "svc.secretGroups" . | fromYaml -}}
{{- $v := index $root.Values.secrets $group -}}
{{- if and $v.existingSecret (include "svc.secretGroupInline" (dict "root" $root "group" $group)) -}}
{{- $problems = append $problems (printf "secrets.%s.existingSecret is set together with inline values of secrets.%s: keep one" $group $group) -}}
{{- end -}}
{{- end -}}
{{- range .Values.serviceTokens.publicKeys.gateway -}}
{{- if has . $root.Values.serviceTokens.publicKeys.jobOrchestrator -}}
{{- $problems = append $problems "serviceTokens.publicKeys: the gateway and the job-orchestrator share a key; give each a key pair of its own" -}}
{{- end -}}
{{- end -}}
{{- range .Values.serviceTokens.internalCallers -}}
{{- if has .name (list "gateway" "key-service" "job-orchestrator" "payment-settler") -}}
{{- $problems = append $problems (printf "serviceTokens.internalCallers: %s is a service's name; give the internal caller a name of its own" .name) -}}
{{- end -}}
{{- end -}}
{{- $workers := .Values.worker -}}
{{- if and $workers.enabled .Values.secrets.worker.privateKey (or $workers.autoscaling.enabled (gt (int $workers.replicaCount) 1)) -}}
{{- $problems = append $problems "secrets.worker.privateKey names one worker: run one replica with it, or leave it empty so each replica creates its own keystore" -}}
{{- end -}}
{{- range $component := list "gateway" "keyService" "jobOrchestrator" "paymentSettler" "worker" -}}
{{- $a := (index $root.Values $component).autoscaling -}}
{{- if and $a.enabled (gt (int $a.minReplicas) (int $a.maxReplicas)) -}}
{{- $problems = append $problems (printf "%s.autoscaling.minReplicas (%v) is above maxReplicas (%v)" $component $a.minReplicas $a.maxReplicas) -}}
{{- end -}}
{{- if and $a.enabled (not $a.targetCPUUtilizationPercentage) (not $a.targetMemoryUtilizationPercentage) -}}
{{- $problems = append $problems (printf "%s.autoscaling is enabled with neither a CPU nor a memory target" $component) -}}
{{- end -}}
{{- end -}}
{{- toYaml $problems -}}
{{- end -}}

{{- define "svc.missingSettings" -}}
{{- $missing := list -}}
{{- $chain := .Values.chain -}}
{{- if not (or $chain.rpcUrl $chain.existingSecret) -}}
{{- $missing = append $missing "chain.rpcUrl (or chain.existingSecret): RPC_URL of the job-orchestrator, payment-settler and workers" -}}
{{- end -}}
{{- if not $chain.chainId -}}
{{- $missing = append $missing "chain.chainId: CHAIN_ID, the chain wallets sign in for (key-service)" -}}
{{- end -}}
{{- if not (and $chain.jobRegistryAddress $chain.workerRegistryAddress) -}}
{{- $missing = append $missing "chain.jobRegistryAddress and chain.workerRegistryAddress: the contracts" -}}
{{- end -}}
{{- if not (or (include "svc.publicUrl" .) (and .Values.keyService.siwe.uri .Values.keyService.siwe.domain)) -}}
{{- $missing = append $missing "publicUrl (or an Ingress host): PUBLIC_URL, SIWE_URI and SIWE_DOMAIN" -}}
{{- end -}}
{{- if not (toString .Values.gateway.trustProxy) -}}
{{- $missing = append $missing "gateway.trustProxy: TRUST_PROXY, the proxies in front of the gateway" -}}
{{- end -}}
{{- if not (or .Values.postgresql.url .Values.postgresql.existingSecret) -}}
{{- $missing = append $missing "postgresql.existingSecret (or postgresql.url): DATABASE_URL of the key-service" -}}
{{- end -}}
{{- if not (or .Values.redis.url .Values.redis.existingSecret) -}}
{{- $missing = append $missing "redis.existingSecret (or redis.url): REDIS_URL, shared by every replica" -}}
{{- end -}}
{{- if not .Values.kafka.brokers -}}
{{- $missing = append $missing "kafka.brokers: KAFKA_BROKERS (unset, each process keeps its events to itself)" -}}
{{- end -}}
{{- with .Values.kafka.sasl -}}
{{- if and (ne .mechanism "none") (not (and .username (or .password .existingSecret))) -}}
{{- $missing = append $missing "kafka.sasl.username and kafka.sasl.existingSecret (or password): the SASL credentials of the brokers" -}}
{{- end -}}
{{- end -}}
{{- $s := .Values.secrets -}}
{{- if not (or $s.gatewayServiceToken.existingSecret $s.gatewayServiceToken.privateKey) -}}
{{- $missing = append $missing "secrets.gatewayServiceToken.existingSecret (or privateKey): the gateway's SERVICE_TOKEN_PRIVATE_KEY" -}}
{{- end -}}
{{- if not (or $s.jobOrchestratorServiceToken.existingSecret $s.jobOrchestratorServiceToken.privateKey) -}}
{{- $missing = append $missing "secrets.jobOrchestratorServiceToken.existingSecret (or privateKey): the job-orchestrator's SERVICE_TOKEN_PRIVATE_KEY (a key pair of its own)" -}}
{{- end -}}
{{- if not .Values.serviceTokens.publicKeys.gateway -}}
{{- $missing = append $missing "serviceTokens.publicKeys.gateway: the public key of the gateway's SERVICE_TOKEN_PRIVATE_KEY (SERVICE_TOKEN_CALLER_KEYS of the services it calls)" -}}
{{- end -}}
{{- if not .Values.serviceTokens.publicKeys.jobOrchestrator -}}
{{- $missing = append $missing "serviceTokens.publicKeys.jobOrchestrator: the public key of the job-orchestrator's SERVICE_TOKEN_PRIVATE_KEY" -}}
{{- end -}}
{{- if not (or $s.signin.existingSecret (and $s.signin.signingKey $s.signin.apiKeyPepper)) -}}
{{- $missing = append $missing "secrets.signin.existingSecret (or signingKey and apiKeyPepper): SIGNIN_TOKEN_SIGNING_KEY and API_KEY_PEPPER" -}}
{{- end -}}
{{- if not (or $s.signer.existingSecret $s.signer.privateKey) -}}
{{- $missing = append $missing "secrets.signer.existingSecret (or privateKey): SERVICE_SIGNER_PRIVATE_KEY (without it completions answer 503)" -}}
{{- end -}}
{{- if .Values.paymentSettler.enabled -}}
{{- if not (or $s.facilitator.existingSecret $s.facilitator.privateKey) -}}
{{- $missing = append $missing "secrets.facilitator.existingSecret (or privateKey): FACILITATOR_PRIVATE_KEY (without it no per-call payments)" -}}
{{- end -}}
{{- if not .Values.paymentSettler.payToAddress -}}
{{- $missing = append $missing "paymentSettler.payToAddress: PAY_TO_ADDRESS, the service signer's address" -}}
{{- end -}}
{{- end -}}
{{- if .Values.worker.enabled -}}
{{- if not (or $s.worker.existingSecret $s.worker.keystorePassword) -}}
{{- $missing = append $missing "secrets.worker.existingSecret (or keystorePassword): KEYSTORE_PASSWORD of the workers" -}}
{{- end -}}
{{- if and (eq .Values.worker.model.backend "openai") (not (and .Values.worker.model.upstreamUrl .Values.worker.model.upstreamModelMap)) -}}
{{- $missing = append $missing "worker.model.upstreamUrl and worker.model.upstreamModelMap: the upstream model server" -}}
{{- end -}}
{{- end -}}
{{- toYaml $missing -}}
{{- end -}}
