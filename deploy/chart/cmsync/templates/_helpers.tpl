{{- define "cmsync.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
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

{{/*
objectKinds is the chart's objectSync.kinds (a list, or a comma list in one string) as
the comma list --object-kinds takes. It fails the install on an entry cmsync would
refuse, with what to write instead: the release never starts a cmsync that stops at
its flags.
*/}}
{{- define "cmsync.objectKinds" -}}
{{- $kinds := include "cmsync.commaList" .Values.objectSync.kinds | splitList "," | compact -}}
{{- range $kinds -}}
{{- if not (regexMatch "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?v([-a-z0-9]*[a-z0-9])?/[A-Z][A-Za-z0-9]{0,62}$" .) -}}
{{- fail (printf "objectSync.kinds: %q is not a kind: write group/version/Kind as the API names it (networking.k8s.io/v1/NetworkPolicy), or v1/Kind for a core kind (v1/LimitRange)" .) -}}
{{- end -}}
{{- $parts := splitList "/" . -}}
{{- if eq (first $parts) "core" -}}
{{- fail (printf "objectSync.kinds: %q: the core group has no name: write v1/%s" . (last $parts)) -}}
{{- end -}}
{{- if and (eq (len $parts) 2) (eq (last $parts) "ConfigMap") -}}
{{- fail (printf "objectSync.kinds: %q: ConfigMaps are copied by the cmsync.io/replicate label or a ConfigMapSync, not by an ObjectSync: remove it" .) -}}
{{- end -}}
{{- if and (eq (len $parts) 2) (eq (last $parts) "Secret") -}}
{{- fail (printf "objectSync.kinds: %q: Secrets are copied by the cmsync.io/replicate label or a SecretSync (secrets.enabled=true), not by an ObjectSync: remove it" .) -}}
{{- end -}}
{{- end -}}
{{- join "," $kinds -}}
{{- end }}

{{/*
objectKindList is each kind of objectSync.kinds as JSON: its entry, group, version,
kind and resource (the plural RBAC and admission name it by). The resource is the
English rule's (lower case; a y after a consonant becomes ies; s, x, z, ch and sh take
es; anything else takes s) unless objectSync.resources gives it for the entry.
*/}}
{{- define "cmsync.objectKindList" -}}
{{- $kinds := include "cmsync.objectKinds" . | splitList "," | compact -}}
{{- $resources := .Values.objectSync.resources | default dict -}}
{{- range $entry, $resource := $resources -}}
{{- if not (has $entry $kinds) -}}
{{- fail (printf "objectSync.resources: %q is not listed in objectSync.kinds: a resource is given for a listed kind, by its entry there" $entry) -}}
{{- end -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" (toString $resource)) -}}
{{- fail (printf "objectSync.resources: %q: %q is not a resource name: write the plural as kubectl api-resources prints it (e.g. networkpolicies)" $entry (toString $resource)) -}}
{{- end -}}
{{- end -}}
{{- $list := list -}}
{{- range $kinds -}}
{{- $parts := splitList "/" . -}}
{{- $kind := last $parts -}}
{{- $plural := lower $kind -}}
{{- if regexMatch "[^aeiou]y$" $plural -}}
{{- $plural = printf "%sies" (trimSuffix "y" $plural) -}}
{{- else if regexMatch "(s|x|z|ch|sh)$" $plural -}}
{{- $plural = printf "%ses" $plural -}}
{{- else -}}
{{- $plural = printf "%ss" $plural -}}
{{- end -}}
{{- $list = append $list (dict "entry" . "group" (ternary "" (first $parts) (eq (len $parts) 2)) "version" (index $parts (sub (len $parts) 2)) "kind" $kind "resource" (get $resources . | default $plural)) -}}
{{- end -}}
{{- toJson $list -}}
{{- end }}

{{/*
objectRules are the RBAC rules of the kinds of objectSync.kinds: every verb the
ObjectSync controller uses on each (it checks them at its start), escalate on Roles
when Role is listed and bind on Roles and ClusterRoles when RoleBinding is: without
them the API server refuses cmsync a Role or binding that grants more than cmsync
holds itself.
*/}}
{{- define "cmsync.objectRules" -}}
{{- $rules := list -}}
{{- $rbac := list -}}
{{- range (include "cmsync.objectKindList" . | fromJsonArray) -}}
{{- $rules = append $rules (dict "apiGroups" (list .group) "resources" (list .resource) "verbs" (list "create" "delete" "get" "list" "patch" "update" "watch")) -}}
{{- if eq .group "rbac.authorization.k8s.io" -}}{{- $rbac = append $rbac .kind -}}{{- end -}}
{{- end -}}
{{- if has "Role" $rbac -}}
{{- $rules = append $rules (dict "apiGroups" (list "rbac.authorization.k8s.io") "resources" (list "roles") "verbs" (list "escalate")) -}}
{{- end -}}
{{- if has "RoleBinding" $rbac -}}
{{- $rules = append $rules (dict "apiGroups" (list "rbac.authorization.k8s.io") "resources" (list "clusterroles" "roles") "verbs" (list "bind")) -}}
{{- end -}}
{{- toJson $rules -}}
{{- end }}
