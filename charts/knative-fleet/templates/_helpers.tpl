{{/* Names, labels and the paths the pod and the service config agree on. */}}

{{- define "knative-fleet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "knative-fleet.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "knative-fleet.selectorLabels" -}}
app.kubernetes.io/name: {{ include "knative-fleet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "knative-fleet.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "knative-fleet.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: knative-fleet
{{- end }}

{{- define "knative-fleet.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "knative-fleet.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "knative-fleet.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The ServiceAccount as an RBAC subject. */}}
{{- define "knative-fleet.subject" -}}
- kind: ServiceAccount
  name: {{ include "knative-fleet.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end }}

{{/* Fixed paths inside the pod. The service reads them from the config file, never guesses them. */}}
{{- define "knative-fleet.configDir" -}}/etc/knative-fleet{{- end }}
{{- define "knative-fleet.providerDir" -}}/etc/cluster-inventory{{- end }}
{{- define "knative-fleet.providerFile" -}}/etc/cluster-inventory/config.json{{- end }}
{{- define "knative-fleet.cacheDir" -}}/var/cache/knative-fleet{{- end }}
{{- define "knative-fleet.credentialsDir" -}}/var/run/secrets/knative-fleet/repository{{- end }}
{{- define "knative-fleet.webhookSecretDir" -}}/var/run/secrets/knative-fleet/webhook{{- end }}
{{- define "knative-fleet.commitStatusTokenDir" -}}/var/run/secrets/knative-fleet/commit-status{{- end }}
{{- define "knative-fleet.notificationsDir" -}}/var/run/secrets/knative-fleet/notifications{{- end }}
{{- define "knative-fleet.caDir" -}}/etc/ssl/knative-fleet{{- end }}

{{/* Leader election is on exactly when more than one pod runs. */}}
{{- define "knative-fleet.sharding" -}}
{{- if and .Values.sharding.enabled (gt (int .Values.replicas) 1) }}true{{ end }}
{{- end }}

{{- define "knative-fleet.leaderElection" -}}
{{- if gt (int .Values.replicas) 1 }}true{{ end }}
{{- end }}

{{/*
The namespace of the rollout state's key Secret: one of its own by default, so that whoever may read Secrets
where the state is (the built-in `edit` role there) cannot read the key (docs/rollout.md, "State on the hub").
*/}}
{{- define "knative-fleet.rolloutKeyNamespace" -}}
{{- .Values.fleet.rolloutKeyNamespace | default (printf "%s-rollout-key" (include "knative-fleet.fullname" .) | trunc 63 | trimSuffix "-") }}
{{- end }}

{{- define "knative-fleet.leaseName" -}}
{{- include "knative-fleet.fullname" . }}
{{- end }}

{{/*
How plugin images are mounted: "imageVolume" or "initContainer". auto picks image volumes from Kubernetes
1.35, the first release that enables them by default. Major/Minor rather than a semver compare: providers
report minors like "35+", and an apiserver built without version stamps reports v0.0.0-master.
*/}}
{{- define "knative-fleet.pluginMount" -}}
{{- $mode := .Values.multicluster.pluginMount }}
{{- if eq $mode "auto" }}
{{- $major := int (regexFind "^[0-9]+" .Capabilities.KubeVersion.Major) }}
{{- $minor := int (regexFind "^[0-9]+" .Capabilities.KubeVersion.Minor) }}
{{- if or (gt $major 1) (and (eq $major 1) (ge $minor 35)) }}imageVolume{{ else }}initContainer{{ end }}
{{- else }}
{{- $mode }}
{{- end }}
{{- end }}

{{/* The volume that carries a plugin: named after the plugin so a values diff reads clearly. */}}
{{- define "knative-fleet.pluginVolume" -}}
{{- printf "plugin-%s" . }}
{{- end }}

{{/*
The rendered service config (config.yaml): the contract with the service, documented in README.md.
*/}}
{{- define "knative-fleet.config" -}}
{{- $fleet := .Values.fleet }}
{{- $repo := $fleet.repository }}
{{- $repository := dict "url" $repo.url "branch" $repo.branch "pathGlob" $repo.pathGlob "maxFetchBytes" (int $repo.maxFetchBytes) }}
{{- if $repo.credentialsSecretRef.name }}
{{- $_ := set $repository "credentialsDir" (include "knative-fleet.credentialsDir" .) }}
{{- end }}
{{- if or $repo.caConfigMapRef.name $repo.caSecretRef.name }}
{{- $_ := set $repository "caFile" (printf "%s/ca.crt" (include "knative-fleet.caDir" .)) }}
{{- end }}
{{- $rollout := dict "checkInterval" $fleet.rolloutCheckInterval "keyNamespace" (include "knative-fleet.rolloutKeyNamespace" .) }}
{{- if $fleet.rolloutPrometheusUrl }}
{{- $_ := set $rollout "prometheusUrl" $fleet.rolloutPrometheusUrl }}
{{- end }}
{{- $config := dict
  "repository" $repository
  "cacheDir" (include "knative-fleet.cacheDir" .)
  "pollSchedule" $fleet.pollInterval
  "defaultNamespace" (default .Release.Namespace $fleet.defaultNamespace)
  "hubInstall" (dict "enabled" .Values.hubInstall.enabled)
  "metricsPort" (int .Values.metrics.port)
  "logLevel" .Values.logLevel
  "remoteDeploymentsPollInterval" .Values.multicluster.remoteDeploymentsPollInterval
  "allowedClusterProfileNamespaces" .Values.multicluster.allowedClusterProfileNamespaces
  "access" .Values.multicluster.access
  "placements" (dict "departureGracePeriod" $fleet.placementDepartureGracePeriod)
  "rollout" $rollout
  "reconciler" $fleet.reconciler
  "leaderElection" (dict
    "enabled" (eq (include "knative-fleet.leaderElection" .) "true")
    "leaseName" (include "knative-fleet.leaseName" .)
    "namespace" .Release.Namespace)
  "sharding" (dict "enabled" (eq (include "knative-fleet.sharding" .) "true"))
  "workers" (int .Values.workers)
  "workersPerCluster" (int .Values.workersPerCluster)
  "manifestLocations" (dict
    "allowedPrefixes" .Values.manifestLocations.allowedPrefixes
    "allowHttp" .Values.manifestLocations.allowHttp
    "allowPrivateNetworks" .Values.manifestLocations.allowPrivateNetworks
    "maxBytesPerLocation" (int64 .Values.manifestLocations.maxBytesPerLocation)
    "maxBytesPerResource" (int64 .Values.manifestLocations.maxBytesPerResource))
}}
{{- $tenancy := dict "reconcileHandMadeCRs" .Values.tenancy.reconcileHandMadeCRs }}
{{- if .Values.tenancy.crNamespaces }}
{{- $_ := set $tenancy "crNamespaces" .Values.tenancy.crNamespaces }}
{{- end }}
{{- $_ := set $config "tenancy" $tenancy }}
{{- if $fleet.status.enabled }}
{{- $_ := set $config "status" (dict
  "path" $fleet.status.path
  "branch" (default $repo.branch $fleet.status.branch)
  "authorName" $fleet.status.authorName
  "authorEmail" $fleet.status.authorEmail) }}
{{- end }}
{{- $cs := $fleet.commitStatus }}
{{- if $cs.enabled }}
{{- $commitStatus := dict
  "provider" $cs.provider
  "apiUrl" $cs.apiUrl
  "tokenFile" (printf "%s/token" (include "knative-fleet.commitStatusTokenDir" .))
  "fleet" $cs.fleet
  "maxClusters" (int $cs.maxClusters)
  "interval" $cs.interval }}
{{- if $cs.repository }}{{- $_ := set $commitStatus "repository" $cs.repository }}{{- end }}
{{- if $cs.targetUrl }}{{- $_ := set $commitStatus "targetUrl" $cs.targetUrl }}{{- end }}
{{- $_ := set $config "commitStatus" $commitStatus }}
{{- end }}
{{- with $fleet.notifications.endpoints }}
{{- $endpoints := list }}
{{- range . }}
{{- $dir := printf "%s/%s" (include "knative-fleet.notificationsDir" $) .name }}
{{- $endpoint := dict "name" .name "format" (default "generic" .format) "urlFile" (printf "%s/url" $dir) }}
{{- if .hmacSecretRef }}{{- $_ := set $endpoint "secretFile" (printf "%s/hmac" $dir) }}{{- end }}
{{- if .events }}{{- $_ := set $endpoint "events" .events }}{{- end }}
{{- $endpoints = append $endpoints $endpoint }}
{{- end }}
{{- $_ := set $config "notifications" (dict
  "endpoints" $endpoints
  "minInterval" $fleet.notifications.minInterval
  "unhealthyAfter" $fleet.notifications.unhealthyAfter) }}
{{- end }}
{{- if .Values.webhook.enabled }}
{{- $_ := set $config "webhook" (dict
  "port" (int .Values.webhook.port)
  "secretFile" (printf "%s/secret" (include "knative-fleet.webhookSecretDir" .))) }}
{{- end }}
{{- toYaml $config }}
{{- end }}

{{/*
The access-provider file, each provider given KUBECONFIG=the plugin kubeconfig (unless it sets its own):
the plugins get no other environment of the pod, and the kubeconfig's context names the credentials
namespace, where the secretreader plugins look for Secrets.
*/}}
{{- define "knative-fleet.providerConfig" -}}
{{- $config := deepCopy .Values.multicluster.accessProvidersConfig }}
{{- range $provider := $config.providers }}
{{- $env := default list $provider.execConfig.env }}
{{- $named := false }}
{{- range $e := $env }}{{- if eq $e.name "KUBECONFIG" }}{{- $named = true }}{{- end }}{{- end }}
{{- if not $named }}
{{- $_ := set $provider.execConfig "env" (append $env (dict "name" "KUBECONFIG" "value" (include "knative-fleet.pluginKubeconfig" $))) }}
{{- end }}
{{- end }}
{{- toPrettyJson $config }}
{{- end }}

{{/* Every namespace the plugins read credentials in, as a JSON array: the plugin kubeconfig's, then each of
multicluster.access.credentialNamespaces (one per ClusterProfile namespace), sorted, without repeats. */}}
{{- define "knative-fleet.credentialNamespaces" -}}
{{- $mc := .Values.multicluster }}
{{- $mapped := values (default dict $mc.access.credentialNamespaces) | sortAlpha }}
{{- prepend $mapped $mc.credentials.namespace | uniq | toJson }}
{{- end }}

{{- define "knative-fleet.pluginKubeconfig" -}}/etc/cluster-inventory/plugin-kubeconfig{{- end }}

{{/* The hub as the pod's ServiceAccount sees it, in the credentials namespace: what the plugins read with. */}}
{{- define "knative-fleet.pluginKubeconfigContent" -}}
apiVersion: v1
kind: Config
clusters:
  - name: hub
    cluster:
      server: https://kubernetes.default.svc
      certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
users:
  - name: knative-fleet
    user:
      tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
contexts:
  - name: spoke-credentials
    context:
      cluster: hub
      user: knative-fleet
      namespace: {{ .Values.multicluster.credentials.namespace }}
current-context: spoke-credentials
{{- end }}
