{{/*
The chart's labels, added to every object's own (the Deployment's selector and
pod labels stay the bundle's, so a pod's identity never depends on the release).
*/}}
{{- define "vip-allocator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/part-of: vip-allocator
{{- with .Chart.AppVersion }}
app.kubernetes.io/version: {{ . | trunc 63 | trimSuffix "-" | quote }}
{{- end }}
{{- end }}

{{/*
The image reference: repository (its registry replaced by image.registry when
set), then @digest or :tag.
*/}}
{{- define "vip-allocator.image" -}}
{{- $repo := .Values.image.repository -}}
{{- with .Values.image.registry -}}
{{- $parts := splitList "/" $repo -}}
{{- if and (gt (len $parts) 1) (or (contains "." (first $parts)) (contains ":" (first $parts)) (eq (first $parts) "localhost")) -}}
{{- $repo = join "/" (prepend (rest $parts) .) -}}
{{- else -}}
{{- $repo = printf "%s/%s" . $repo -}}
{{- end -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (toString .Values.image.tag) -}}
{{- end -}}
{{- end }}

{{/*
The agents' flags (the operator's --agent-args): only those a value sets, so
the defaults leave the agents' command line, and the bundle's, as they are.
*/}}
{{- define "vip-allocator.agentArgs" -}}
{{- $a := .Values.agent -}}
{{- $args := list -}}
{{- if .Values.ownClassOnly }}{{ $args = append $args "--own-class-only" }}{{ end -}}
{{- if not .Values.metrics.enabled }}{{ $args = append $args "--metrics-bind-address=0" }}{{ end -}}
{{- if not .Values.metrics.secure }}{{ $args = append $args "--metrics-secure=false" }}{{ end -}}
{{- if ne $a.dataplane "auto" }}{{ $args = append $args (printf "--dataplane=%s" $a.dataplane) }}{{ end -}}
{{- if ne $a.livenessTimers "tuned" }}{{ $args = append $args (printf "--liveness-timers=%s" $a.livenessTimers) }}{{ end -}}
{{- if not (kindIs "invalid" $a.memberlistPort) }}{{ $args = append $args (printf "--memberlist-port=%d" (int $a.memberlistPort)) }}{{ end -}}
{{- if not (kindIs "invalid" $a.masqueradeBit) }}{{ $args = append $args (printf "--masquerade-bit=%d" (int $a.masqueradeBit)) }}{{ end -}}
{{- with $a.onStop }}{{ $args = append $args (printf "--on-stop=%s" .) }}{{ end -}}
{{- with $a.handoverDelay }}{{ $args = append $args (printf "--handover-delay=%s" .) }}{{ end -}}
{{- with $a.bgpGracefulShutdown }}{{ $args = append $args (printf "--bgp-graceful-shutdown=%s" .) }}{{ end -}}
{{- if not (kindIs "invalid" $a.newAddressProbes) }}{{ $args = append $args (printf "--new-address-probes=%d" (int $a.newAddressProbes)) }}{{ end -}}
{{- with $a.newAddressProbeInterval }}{{ $args = append $args (printf "--new-address-probe-interval=%s" .) }}{{ end -}}
{{- if kindIs "bool" $a.connectionHandoff }}{{ $args = append $args (printf "--connection-handoff=%t" $a.connectionHandoff) }}{{ end -}}
{{- if kindIs "bool" $a.returnPaths }}{{ $args = append $args (printf "--return-paths=%t" $a.returnPaths) }}{{ end -}}
{{- range $a.extraArgs }}{{ $args = append $args . }}{{ end -}}
{{- join " " $args -}}
{{- end }}

{{/*
The operator's flags after the bundle's own ("operator", "--leader-elect"), as
YAML list items: only those a value sets.
*/}}
{{- define "vip-allocator.operatorArgs" -}}
{{- $o := .Values.operator -}}
{{- $args := list -}}
{{- if .Values.ownClassOnly }}{{ $args = append $args "--own-class-only" }}{{ end -}}
{{- if ne .Values.ipMode "Proxy" }}{{ $args = append $args (printf "--ip-mode=%s" .Values.ipMode) }}{{ end -}}
{{- if ne .Values.onCordon "handover" }}{{ $args = append $args (printf "--on-cordon=%s" .Values.onCordon) }}{{ end -}}
{{- with .Values.serviceCIDRs }}{{ $args = append $args (printf "--service-cidrs=%s" (join "," .)) }}{{ end -}}
{{- with .Values.releasedAddressGrace }}{{ $args = append $args (printf "--released-address-grace=%s" .) }}{{ end -}}
{{- if not .Values.metrics.enabled }}{{ $args = append $args "--metrics-bind-address=0" }}{{ end -}}
{{- if not .Values.metrics.secure }}{{ $args = append $args "--metrics-secure=false" }}{{ end -}}
{{- if not (kindIs "invalid" $o.workers) }}{{ $args = append $args (printf "--workers=%d" (int $o.workers)) }}{{ end -}}
{{- if not (kindIs "invalid" $o.kubeAPIQPS) }}{{ $args = append $args (printf "--kube-api-qps=%v" $o.kubeAPIQPS) }}{{ end -}}
{{- if not (kindIs "invalid" $o.kubeAPIBurst) }}{{ $args = append $args (printf "--kube-api-burst=%d" (int $o.kubeAPIBurst)) }}{{ end -}}
{{- with $o.pprofBindAddress }}{{ $args = append $args (printf "--pprof-bind-address=%s" .) }}{{ end -}}
{{- if not (kindIs "invalid" $o.migrationWorkers) }}{{ $args = append $args (printf "--migration-workers=%d" (int $o.migrationWorkers)) }}{{ end -}}
{{- with $o.migrationCutoverDelay }}{{ $args = append $args (printf "--migration-cutover-delay=%s" .) }}{{ end -}}
{{- with .Values.agent.image }}{{ $args = append $args (printf "--agent-image=%s" .) }}{{ end -}}
{{- with .Values.agent.nodeSelector -}}
{{- $pairs := list -}}
{{- range $k, $v := . }}{{ $pairs = append $pairs (printf "%s=%s" $k $v) }}{{ end -}}
{{- $args = append $args (printf "--agent-node-selector=%s" (join "," $pairs)) -}}
{{- end -}}
{{- if kindIs "slice" .Values.agent.tolerations }}{{ $args = append $args (printf "--agent-tolerations=%s" (toJson .Values.agent.tolerations)) }}{{ end -}}
{{- with include "vip-allocator.agentArgs" . }}{{ $args = append $args (printf "--agent-args=%s" .) }}{{ end -}}
{{- range $o.extraArgs }}{{ $args = append $args . }}{{ end -}}
{{- range $args }}{{ printf "- %s\n" (quote .) }}{{ end }}
{{- end }}

{{/*
What the schema cannot say: values that only make sense together.
*/}}
{{- define "vip-allocator.validate" -}}
{{- if and .Values.monitoring.enabled (not .Values.metrics.enabled) -}}
{{- fail "monitoring.enabled needs metrics.enabled: the ServiceMonitors scrape the metrics endpoints that metrics.enabled=false turns off" -}}
{{- end -}}
{{- if and (not .Values.image.tag) (not .Values.image.digest) -}}
{{- fail "image.tag or image.digest must be set: the image reference needs one (e.g. --set image.tag=0.1.0)" -}}
{{- end -}}
{{- end }}
