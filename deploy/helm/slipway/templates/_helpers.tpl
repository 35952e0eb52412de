{{/*
The image reference both workloads run: repository:tag, or repository:tag@digest when a digest is set.
*/}}
{{- define "slipway.image" -}}
{{- $img := .Values.image -}}
{{- if not $img.repository }}{{ fail "image.repository must be set" }}{{ end -}}
{{- if not $img.tag }}{{ fail "image.tag must be set: a release tag (never latest)" }}{{ end -}}
{{- if eq (toString $img.tag) "latest" }}{{ fail "image.tag: latest is refused; pin a release tag (and optionally image.digest)" }}{{ end -}}
{{- $img.repository }}:{{ $img.tag }}{{ with $img.digest }}@{{ . }}{{ end -}}
{{- end -}}

{{/*
Pod-level scheduling of a workload: dict "root" $ "w" .Values.operator (or .agent). imagePullSecrets,
priorityClassName, nodeSelector, affinity and tolerations, each only when set.
*/}}
{{- define "slipway.scheduling" -}}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .w.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .w.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .w.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .w.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
The update-operator's flags, as a YAML list: the named values in the kustomize base's order, then
operator.extraArgs.
*/}}
{{- define "slipway.operatorArgs" -}}
{{- $op := .Values.operator -}}
{{- $args := list -}}
{{- with $op.maxUnavailable }}{{ $args = append $args (printf "--max-unavailable=%v" .) }}{{ end -}}
{{- with $op.drainTimeout }}{{ $args = append $args (printf "--drain-timeout=%v" .) }}{{ end -}}
{{- with $op.drainFailurePolicy }}{{ $args = append $args (printf "--drain-failure-policy=%v" .) }}{{ end -}}
{{- if $op.startPaused }}{{ $args = append $args "--start-paused=true" }}{{ end -}}
{{- with $op.groupLabel }}{{ $args = append $args (printf "--group-label=%v" .) }}{{ end -}}
{{- with $op.maxUnavailablePerGroup }}{{ $args = append $args (printf "--max-unavailable-per-group=%v" .) }}{{ end -}}
{{- range $op.rebootWindows }}{{ $args = append $args (printf "--reboot-window=%v" .) }}{{ end -}}
{{- with $op.beforeRebootAnnotations }}{{ $args = append $args (printf "--before-reboot-annotations=%s" (join "," .)) }}{{ end -}}
{{- with $op.afterRebootAnnotations }}{{ $args = append $args (printf "--after-reboot-annotations=%s" (join "," .)) }}{{ end -}}
{{- with $op.undrainableRetry }}{{ $args = append $args (printf "--undrainable-retry=%v" .) }}{{ end -}}
{{- with $op.drainPodSelector }}{{ $args = append $args (printf "--drain-pod-selector=%v" .) }}{{ end -}}
{{- with $op.skipWaitForDeleteTimeout }}{{ $args = append $args (printf "--skip-wait-for-delete-timeout=%v" .) }}{{ end -}}
{{- if not (kindIs "invalid" $op.waitForVolumeDetach) }}{{ $args = append $args (printf "--wait-for-volume-detach=%v" $op.waitForVolumeDetach) }}{{ end -}}
{{- with $op.volumeDetachTimeout }}{{ $args = append $args (printf "--volume-detach-timeout=%v" .) }}{{ end -}}
{{- with $op.settleTime }}{{ $args = append $args (printf "--settle-time=%v" .) }}{{ end -}}
{{- if not (kindIs "invalid" $op.settlePdbs) }}{{ $args = append $args (printf "--settle-pdbs=%v" $op.settlePdbs) }}{{ end -}}
{{- with $op.settleTimeout }}{{ $args = append $args (printf "--settle-timeout=%v" .) }}{{ end -}}
{{- with $op.settleTimeoutPolicy }}{{ $args = append $args (printf "--settle-timeout-policy=%v" .) }}{{ end -}}
{{- range $op.healthChecks }}{{ $args = append $args (printf "--health-check=%v" .) }}{{ end -}}
{{- with $op.canaryNodes }}{{ $args = append $args (printf "--canary-nodes=%v" .) }}{{ end -}}
{{- with $op.canaryBake }}{{ $args = append $args (printf "--canary-bake=%v" .) }}{{ end -}}
{{- with $op.maxFailedPerVersion }}{{ $args = append $args (printf "--max-failed-per-version=%v" .) }}{{ end -}}
{{- with $op.preferNoScheduleTaint }}{{ $args = append $args (printf "--prefer-no-schedule-taint=%v" .) }}{{ end -}}
{{- if $op.excludeFromLoadBalancers }}{{ $args = append $args "--exclude-from-load-balancers=true" }}{{ end -}}
{{- with $op.preRebootNodeLabels }}{{ $args = append $args (printf "--pre-reboot-node-labels=%s" (join "," .)) }}{{ end -}}
{{- with $op.postRebootNodeLabels }}{{ $args = append $args (printf "--post-reboot-node-labels=%s" (join "," .)) }}{{ end -}}
{{- if $op.proofSecret }}{{ $args = append $args "--proof-bearer-token-file=/var/run/secrets/slipway-proof/token" }}{{ end -}}
{{- if ($op.remediationFence).nodeHealthCheck }}{{ $args = append $args "--remediation-lease-namespace=medik8s-leases" }}{{ end -}}
{{- if ($op.remediationFence).machinesKubeconfigSecret }}{{ $args = append $args "--remediation-machines-kubeconfig=/var/run/secrets/slipway-machines/kubeconfig" }}{{ end -}}
{{- range $op.extraArgs }}{{ $args = append $args (toString .) }}{{ end -}}
{{- toYaml $args -}}
{{- end -}}

{{/*
The operator's hook and steering values, checked, as the strings its admission policy's settings
variables hold (deploy/base/operator-policy.yaml: beforeRebootAnnotations ... preferNoScheduleTaint):
a CEL string literal of the flag's value; and what the RebootPolicies of .Values.policies steer with
(rebootPolicyLabels, rebootPolicyTaints), so a pool declared here may write its own labels and taint. The checks keep a quote out of the literal, and refuse here
what the operator would refuse at start.
*/}}
{{- define "slipway.policySettings" -}}
{{- $op := .Values.operator -}}
{{- range (concat ($op.beforeRebootAnnotations | default list) ($op.afterRebootAnnotations | default list)) }}
{{- if not (regexMatch "^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$" (toString .)) }}
{{- fail (printf "operator.beforeRebootAnnotations/afterRebootAnnotations: %q is not an annotation key" (toString .)) }}
{{- end }}
{{- end }}
{{- range (concat ($op.preRebootNodeLabels | default list) ($op.postRebootNodeLabels | default list)) }}
{{- if not (regexMatch "^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?(=(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?|-)$" (toString .)) }}
{{- fail (printf "operator.preRebootNodeLabels/postRebootNodeLabels: %q is not KEY=VALUE or KEY-" (toString .)) }}
{{- end }}
{{- end }}
{{- with $op.preferNoScheduleTaint }}
{{- if not (regexMatch "^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$" (toString .)) }}
{{- fail (printf "operator.preferNoScheduleTaint: %q is not a taint key" (toString .)) }}
{{- end }}
{{- end -}}
beforeRebootAnnotations: {{ printf "'%s'" (join "," ($op.beforeRebootAnnotations | default list)) | quote }}
afterRebootAnnotations: {{ printf "'%s'" (join "," ($op.afterRebootAnnotations | default list)) | quote }}
preRebootNodeLabels: {{ printf "'%s'" (join "," ($op.preRebootNodeLabels | default list)) | quote }}
postRebootNodeLabels: {{ printf "'%s'" (join "," ($op.postRebootNodeLabels | default list)) | quote }}
excludeFromLoadBalancers: {{ printf "'%t'" (eq (toString $op.excludeFromLoadBalancers) "true") | quote }}
preferNoScheduleTaint: {{ printf "'%s'" ($op.preferNoScheduleTaint | default "") | quote }}
{{- $labels := list }}
{{- $taints := list }}
{{- range $.Values.policies }}
{{- with (.spec | default dict).steering }}
{{- $labels = concat $labels (.preLabels | default list) (.postLabels | default list) }}
{{- if .excludeFromLoadBalancers }}{{ $labels = append $labels "node.kubernetes.io/exclude-from-external-load-balancers=true" }}{{ end }}
{{- with .preferNoScheduleTaint }}{{ $taints = append $taints . }}{{ end }}
{{- end }}
{{- end }}
{{- range $labels }}
{{- if not (regexMatch "^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?(=(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?|-)$" (toString .)) }}
{{- fail (printf "policies[].spec.steering: label %q is not KEY=VALUE or KEY-" (toString .)) }}
{{- end }}
{{- end }}
{{- range $taints }}
{{- if not (regexMatch "^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$" (toString .)) }}
{{- fail (printf "policies[].spec.steering.preferNoScheduleTaint: %q is not a taint key" (toString .)) }}
{{- end }}
{{- end }}
rebootPolicyLabels: {{ printf "'%s'" (join "," ($labels | uniq)) | quote }}
rebootPolicyTaints: {{ printf "'%s'" (join "," ($taints | uniq)) | quote }}
{{- end -}}

{{/*
The agent's scheduling values, with Slipway's agent kept off FleetLock nodes when a FleetLock server is
on (deploy/fleetlock/agent-not-on-fleetlock-nodes.yaml). (The chart has no agent.affinity to merge.)
*/}}
{{- define "slipway.agentScheduling" -}}
{{- $ag := .Values.agent -}}
{{- $fl := .Values.fleetlock -}}
{{- if and $fl.enabled $fl.central.enabled }}{{ fail "fleetlock.enabled (a server on each node) and fleetlock.central.enabled (one server) exclude each other: pick one" }}{{ end -}}
{{- if or $fl.enabled $fl.central.enabled -}}
{{- $notOnFleetLockNodes := dict "key" "update.slipway.dev/fleetlock" "operator" "NotIn" "values" (list "true") -}}
{{- $aff := dict "nodeAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution" (dict "nodeSelectorTerms" (list (dict "matchExpressions" (list $notOnFleetLockNodes))))) -}}
{{- include "slipway.scheduling" (dict "root" . "w" (merge (dict "affinity" $aff) $ag)) -}}
{{- else -}}
{{- include "slipway.scheduling" (dict "root" . "w" $ag) -}}
{{- end -}}
{{- end -}}
