{{/*
A gRPC service of the runner (key-service, job-orchestrator, payment-settler): a Deployment whose one
container runs `--target <component>` with GRPC_HOST 0.0.0.0, native gRPC health probes (grpc.health.v1),
its headless Service, its metrics Service, and its autoscaler and disruption budget. Headless, so that a client's DNS lookup
returns every ready replica and its round_robin policy spreads calls over them (a ClusterIP would balance
per connection only: replicas added later would take no calls from clients already connected).
(dict "root" $ "component" "key-service" "values" .Values.keyService "wired" map
 "listeners" (list (dict "name" "worker-link" "port" 50052)); listeners are optional: more gRPC listeners of
 the pod, on its headless Service beside `grpc`; so are "volumes" and "volumeMounts", lists of Kubernetes
 volumes and the container's mounts of them, e.g. the worker link's TLS Secret)
*/}}
{{- define "svc.grpcWorkload" -}}
{{- $root := .root -}}
{{- $c := .values -}}
{{- $ctx := dict "root" $root "component" .component "values" $c -}}
{{- $name := include "svc.componentName" $ctx -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "svc.labels" $ctx | nindent 4 }}
  {{- include "svc.annotations" (dict "root" $root) }}
spec:
  {{- if not $c.autoscaling.enabled }}
  replicas: {{ $c.replicaCount }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "svc.selectorLabels" $ctx | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "svc.selectorLabels" $ctx | nindent 8 }}
        {{- with $c.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        {{- include "svc.podAnnotations" $ctx | nindent 8 }}
    spec:
      {{- include "svc.podSettings" $ctx | nindent 6 }}
      containers:
        - name: {{ .component }}
          image: {{ include "svc.image" (dict "root" $root "image" $c.image) }}
          imagePullPolicy: {{ include "svc.imagePullPolicy" (dict "root" $root "image" $c.image) }}
          args: ["--target", {{ .component | quote }}]
          ports:
            - name: grpc
              containerPort: {{ $c.service.port }}
              protocol: TCP
            {{- range .listeners }}
            - name: {{ .name }}
              containerPort: {{ .port }}
              protocol: TCP
            {{- end }}
            - name: metrics
              containerPort: {{ $c.metrics.port }}
              protocol: TCP
          env:
            {{- include "svc.envList" (dict "root" $root "wired" .wired "values" $c "component" .component) | trim | nindent 12 }}
          {{- with $c.envFrom }}
          envFrom:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- if $c.probes.startup.enabled }}
          startupProbe:
            {{- include "svc.probe" (dict "probe" $c.probes.startup "grpc" $c.service.port "service" $c.probes.startup.grpcService) | nindent 12 }}
          {{- end }}
          {{- if $c.probes.liveness.enabled }}
          livenessProbe:
            {{- include "svc.probe" (dict "probe" $c.probes.liveness "grpc" $c.service.port "service" $c.probes.liveness.grpcService) | nindent 12 }}
          {{- end }}
          {{- if $c.probes.readiness.enabled }}
          readinessProbe:
            {{- include "svc.probe" (dict "probe" $c.probes.readiness "grpc" $c.service.port "service" $c.probes.readiness.grpcService) | nindent 12 }}
          {{- end }}
          {{- with $c.lifecycle }}
          lifecycle:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          resources:
            {{- toYaml $c.resources | nindent 12 }}
          securityContext:
            {{- toYaml $root.Values.containerSecurityContext | nindent 12 }}
          volumeMounts:
            {{- include "svc.scratchMounts" $root | nindent 12 }}
            {{- with .volumeMounts }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
      volumes:
        {{- include "svc.scratchVolumes" $root | nindent 8 }}
        {{- with .volumes }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "svc.labels" $ctx | nindent 4 }}
  {{- include "svc.annotations" (dict "root" $root "extra" $c.service.annotations) }}
spec:
  type: ClusterIP
  clusterIP: None
  selector:
    {{- include "svc.selectorLabels" $ctx | nindent 4 }}
  ports:
    - name: grpc
      port: {{ $c.service.port }}
      targetPort: grpc
      protocol: TCP
      appProtocol: grpc
    {{- range .listeners }}
    - name: {{ .name }}
      port: {{ .port }}
      targetPort: {{ .name }}
      protocol: TCP
      appProtocol: grpc
    {{- end }}
---
{{ include "svc.metricsService" $ctx }}
{{- include "svc.hpa" (merge (dict "kind" "Deployment") $ctx) }}
{{- include "svc.pdb" $ctx }}
{{- end -}}
