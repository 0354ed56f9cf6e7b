{{- define "cmsync.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "cmsync.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{ include "cmsync.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "cmsync.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* image is the container image: pinned by image.digest when set, else by tag. */}}
{{- define "cmsync.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{- define "cmsync.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "cmsync.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- /* "true" when the API server serves ValidatingAdmissionPolicy (Kubernetes 1.30 and later). */ -}}
{{- define "cmsync.admissionAvailable" -}}
{{- if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy" -}}true{{- end -}}
{{- end -}}

{{/*
extraReservedNames is the chart's reservedNames (a list, or a comma list in one string)
as the comma list --reserved-names takes; reservedNames is it with kube-root-ca.crt,
which cmsync reserves whatever its flags say.
*/}}
{{- define "cmsync.extraReservedNames" -}}
{{- include "cmsync.commaList" .Values.reservedNames -}}
{{- end }}

{{/*
commaList is a value given as a list, or as a comma list in one string, as one comma
list: entries trimmed, empty ones and repeats dropped.
*/}}
{{- define "cmsync.commaList" -}}
{{- $names := . -}}
{{- if kindIs "string" $names -}}{{- $names = splitList "," $names -}}{{- end -}}
{{- $clean := list -}}
{{- range $names }}{{- if trim . }}{{- $clean = append $clean (trim .) -}}{{- end }}{{- end -}}
{{- join "," ($clean | uniq) -}}
{{- end }}

{{- define "cmsync.reservedNames" -}}
{{- $extra := include "cmsync.extraReservedNames" . -}}
{{- if $extra -}}kube-root-ca.crt,{{ $extra }}{{- else -}}kube-root-ca.crt{{- end -}}
{{- end }}

{{/*
scope is the chart's scope.namespaces (a list, or a comma list in one string) as the
comma list --namespaces takes: the namespaces cmsync serves in scoped mode; empty:
every namespace.
*/}}
{{- define "cmsync.scope" -}}
{{- include "cmsync.commaList" .Values.scope.namespaces -}}
{{- end }}

{{/*
scopeMissing is the comma list of the namespaces of the scope that do not exist in the
cluster (helm install and upgrade look them up; helm template cannot, and finds none
missing): a Role cannot be created before its namespace.
*/}}
{{- define "cmsync.scopeMissing" -}}
{{- $missing := list -}}
{{- if lookup "v1" "Namespace" "" "kube-system" -}}
{{- range (include "cmsync.scope" . | splitList "," | compact) -}}
{{- if not (lookup "v1" "Namespace" "" .) }}{{ $missing = append $missing . }}{{ end -}}
{{- end -}}
{{- end -}}
{{- join "," $missing -}}
{{- end }}
