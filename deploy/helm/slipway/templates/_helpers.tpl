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
operator.extraArgs, then what FleetLock adds (the overlay appends it last).
*/}}
{{- define "slipway.operatorArgs" -}}
{{- $op := .Values.operator -}}
{{- $args := list -}}
{{- with $op.maxUnavailable }}{{ $args = append $args (printf "--max-unavailable=%v" .) }}{{ end -}}
{{- with $op.drainTimeout }}{{ $args = append $args (printf "--drain-timeout=%v" .) }}{{ end -}}
{{- with $op.drainFailurePolicy }}{{ $args = append $args (printf "--drain-failure-policy=%v" .) }}{{ end -}}
{{- with $op.groupLabel }}{{ $args = append $args (printf "--group-label=%v" .) }}{{ end -}}
{{- with $op.maxUnavailablePerGroup }}{{ $args = append $args (printf "--max-unavailable-per-group=%v" .) }}{{ end -}}
{{- range $op.rebootWindows }}{{ $args = append $args (printf "--reboot-window=%v" .) }}{{ end -}}
{{- range $op.extraArgs }}{{ $args = append $args (toString .) }}{{ end -}}
{{- if .Values.fleetlock.enabled }}{{ $args = append $args (printf "--fleetlock-address=:%v" .Values.fleetlock.port) }}{{ end -}}
{{- toYaml $args -}}
{{- end -}}
