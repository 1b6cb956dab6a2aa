{{/*
Where each provider's execConfig.command lives: JSON {"files": {plugin: [path relative to its mountPath]},
"strays": [provider commands under no plugin mountPath]}. The initContainer mount copies exactly these files.
*/}}
{{- define "knative-fleet.pluginFiles" -}}
{{- $files := dict }}
{{- $strays := list }}
{{- range $plugin := .Values.multicluster.plugins }}
{{- $_ := set $files $plugin.name list }}
{{- end }}
{{- range $i, $provider := .Values.multicluster.accessProvidersConfig.providers }}
{{- $command := clean $provider.execConfig.command }}
{{- $owner := "" }}
{{- range $plugin := $.Values.multicluster.plugins }}
{{- $mount := clean $plugin.mountPath }}
{{- if hasPrefix (printf "%s/" (trimSuffix "/" $mount)) $command }}
{{- $owner = $plugin.name }}
{{- $_ := set $files $plugin.name (append (get $files $plugin.name) (trimPrefix "/" (trimPrefix $mount $command)) | uniq) }}
{{- end }}
{{- end }}
{{- if not $owner }}
{{- $strays = append $strays (printf "providers[%d] (%s): %s" $i $provider.name $provider.execConfig.command) }}
{{- end }}
{{- end }}
{{- toJson (dict "files" $files "strays" $strays) }}
{{- end }}

{{/* Paths of the pod a plugin must not be mounted over or inside of. */}}
{{- define "knative-fleet.reservedPaths" -}}
{{- list "/" "/bin" "/dev" "/etc" "/lib" "/lib64" "/opt" "/proc" "/run" "/sbin" "/sys" "/tmp" "/usr" "/var" "/var/run" | toJson }}
{{- end }}
{{- define "knative-fleet.ownPaths" -}}
{{- list
  (include "knative-fleet.configDir" .)
  (include "knative-fleet.providerDir" .)
  (include "knative-fleet.cacheDir" .)
  (include "knative-fleet.caDir" .)
  "/var/run/secrets"
  "/opt/knative-fleet"
  "/tmp"
  | toJson }}
{{- end }}

{{/* Fails the render, with the value to fix, on values that are valid one by one but inconsistent together. */}}
{{- define "knative-fleet.validate" -}}
{{- $repo := .Values.fleet.repository }}
{{- if and .Values.multicluster.enabled (eq .Values.multicluster.credentials.namespace .Release.Namespace) }}
{{- fail (printf "multicluster.credentials.namespace must not be the release namespace %s: the plugins would then read the Git credentials too" .Release.Namespace) }}
{{- end }}
{{- range $profiles, $credentials := .Values.multicluster.access.credentialNamespaces }}
{{- if and $.Values.multicluster.enabled (eq $credentials $.Release.Namespace) }}
{{- fail (printf "multicluster.access.credentialNamespaces.%s must not be the release namespace %s: the plugins would then read the Git credentials too" $profiles $.Release.Namespace) }}
{{- end }}
{{- end }}
{{- if not $repo.url }}
{{- fail "fleet.repository.url is required: the http(s) URL of the fleet Git repository (--set fleet.repository.url=https://git.example.com/platform/fleet.git)" }}
{{- end }}
{{- if not (regexMatch "^https?://" $repo.url) }}
{{- fail (printf "fleet.repository.url %q must be an http(s) URL: the reconciler speaks Git over HTTP(S) only" $repo.url) }}
{{- end }}
{{- if regexMatch "^https?://[^/]*@" $repo.url }}
{{- fail "fleet.repository.url must not carry credentials (it is rendered into a ConfigMap): put them in a Secret and set fleet.repository.credentialsSecretRef.name" }}
{{- end }}
{{- if and $repo.caConfigMapRef.name $repo.caSecretRef.name }}
{{- fail "fleet.repository.caConfigMapRef and fleet.repository.caSecretRef are both set: the repository CA comes from one of them" }}
{{- end }}
{{- if and .Values.fleet.commitStatus.enabled (not .Values.fleet.commitStatus.tokenSecretRef.name) }}
{{- fail "fleet.commitStatus.enabled requires fleet.commitStatus.tokenSecretRef.name: a Secret with the Git host's API token" }}
{{- end }}
{{- if and .Values.webhook.enabled (not .Values.webhook.secretRef.name) }}
{{- fail "webhook.enabled requires webhook.secretRef.name: a Secret with the GitHub webhook secret or GitLab token, so that only the Git server can trigger syncs" }}
{{- end }}
{{- if and .Values.webhook.ingress.enabled (not .Values.webhook.enabled) }}
{{- fail "webhook.ingress.enabled requires webhook.enabled" }}
{{- end }}
{{- if and (not .Values.serviceAccount.create) (not .Values.serviceAccount.name) }}
{{- fail "serviceAccount.name is required when serviceAccount.create is false" }}
{{- end }}
{{- $mc := .Values.multicluster }}
{{- if $mc.enabled }}
{{- if not (get (default dict $mc.accessProvidersConfig) "providers") }}
{{- fail "multicluster.enabled is true but multicluster.accessProvidersConfig is empty: list the access providers (providers[].name, providers[].execConfig) the ClusterProfiles use, or set multicluster.enabled=false" }}
{{- end }}
{{- $reserved := include "knative-fleet.reservedPaths" . | fromJsonArray }}
{{- $own := include "knative-fleet.ownPaths" . | fromJsonArray }}
{{- $names := dict }}
{{- $mounts := list }}
{{- range $i, $plugin := $mc.plugins }}
{{- if hasKey $names $plugin.name }}
{{- fail (printf "multicluster.plugins[%d]: the name %q is used twice" $i $plugin.name) }}
{{- end }}
{{- $_ := set $names $plugin.name true }}
{{- if not (isAbs $plugin.mountPath) }}
{{- fail (printf "multicluster.plugins[%d] (%s): mountPath %q must be an absolute path" $i $plugin.name $plugin.mountPath) }}
{{- end }}
{{- $mount := clean $plugin.mountPath }}
{{- if has $mount $reserved }}
{{- fail (printf "multicluster.plugins[%d] (%s): mountPath %q would hide a system directory of the container" $i $plugin.name $plugin.mountPath) }}
{{- end }}
{{- range $path := concat $own $mounts }}
{{- if or (eq $mount $path) (hasPrefix (printf "%s/" $path) $mount) (hasPrefix (printf "%s/" $mount) $path) }}
{{- fail (printf "multicluster.plugins[%d] (%s): mountPath %q overlaps %q" $i $plugin.name $plugin.mountPath $path) }}
{{- end }}
{{- end }}
{{- $mounts = append $mounts $mount }}
{{- end }}
{{- range $i, $provider := $mc.accessProvidersConfig.providers }}
{{- if not (isAbs $provider.execConfig.command) }}
{{- fail (printf "multicluster.accessProvidersConfig.providers[%d] (%s): execConfig.command %q must be an absolute path under a multicluster.plugins[].mountPath" $i $provider.name $provider.execConfig.command) }}
{{- end }}
{{- end }}
{{- $strays := get (include "knative-fleet.pluginFiles" . | fromJson) "strays" }}
{{- if $strays }}
{{- $mountList := list }}
{{- range $mc.plugins }}{{ $mountList = append $mountList .mountPath }}{{ end }}
{{- fail (printf "multicluster.accessProvidersConfig: execConfig.command must be a file under a multicluster.plugins[].mountPath (%s), but %s" (default "no plugins are configured" (join ", " $mountList)) (join "; " $strays)) }}
{{- end }}
{{- end }}
{{- end }}
