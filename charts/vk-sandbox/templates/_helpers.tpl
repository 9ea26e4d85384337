{{/* The name of every object of the release. */}}
{{- define "vk-sandbox.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "vk-sandbox.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{ include "vk-sandbox.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* Labels that select the DaemonSet's Pods. */}}
{{- define "vk-sandbox.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "vk-sandbox.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "vk-sandbox.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The rules of one kind (ClusterRole or Role) in files/rbac.yaml, a link to
manifests/rbac.yaml: the chart grants exactly what the plain manifests do.
*/}}
{{- define "vk-sandbox.rules" -}}
{{- $kind := .kind -}}
{{- $found := false -}}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" (.root.Files.Get "files/rbac.yaml") -1 -}}
{{- $obj := fromYaml $doc -}}
{{- if and (not $found) (eq (get $obj "kind") $kind) -}}
{{- $found = true -}}
{{- toYaml (get $obj "rules") -}}
{{- end -}}
{{- end -}}
{{- if not $found -}}
{{- fail (printf "files/rbac.yaml has no %s" $kind) -}}
{{- end -}}
{{- end -}}

{{/* The vk-sandbox image: repository:tag, the tag defaulting to the
chart's appVersion. */}}
{{- define "vk-sandbox.image" -}}
{{- printf "%s:%s" (required "image.repository is required" .Values.image.repository) (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
