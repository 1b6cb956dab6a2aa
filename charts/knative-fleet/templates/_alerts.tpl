{{/*
The alert rules: one source for the PrometheusRule (prometheusrule.yaml), the plain rules file in a ConfigMap
(alerts-configmap.yaml) and docs/monitoring/knative-fleet.rules.yaml (npm run generate:monitoring renders it
from this template). Each alert's `for`, severity and threshold are values (alerts.rules.<Name>); the runbook
of each is a section of docs/monitoring.md. `{{ "{{" }} ... {{ "}}" }}` below is left for Prometheus to expand.
*/}}

{{/* The series of this release: alerts.selector, or the scrape job a ServiceMonitor names after the Service. */}}
{{- define "knative-fleet.alertSelector" -}}
{{- default (printf "job=%q" (include "knative-fleet.fullname" .)) .Values.alerts.selector }}
{{- end }}

{{- define "knative-fleet.alertRules" -}}
{{- $s := include "knative-fleet.alertSelector" . }}
{{- $r := .Values.alerts.rules }}
{{- $alerts := list
  (dict "name" "KnativeFleetDown"
    "expr" (printf "absent(up{%s} == 1)" $s)
    "summary" "No knative-fleet replica is being scraped."
    "description" (printf "Prometheus has scraped no knative-fleet replica (%s) for %s: nothing reconciles the fleet, syncs Git or writes status. Check the pods and the scrape target." $s $r.KnativeFleetDown.for))
  (dict "name" "KnativeFleetNoLeader"
    "expr" (printf "sum by (namespace, job) (knative_fleet_leader{%s}) < 1" $s)
    "summary" "No knative-fleet replica leads."
    "description" (printf "No replica of {{ $labels.job }} has held the leader Lease for %s: no Git sync, prune, rollout or status write-back runs." $r.KnativeFleetNoLeader.for))
  (dict "name" "KnativeFleetMultipleLeaders"
    "expr" (printf "sum by (namespace, job) (knative_fleet_leader{%s}) > 1" $s)
    "summary" "Two or more knative-fleet replicas lead at once."
    "description" (printf "{{ $value }} replicas of {{ $labels.job }} have reported themselves leader for %s: two replicas may sync and prune side by side. Check the leader Lease and the replicas' clocks." $r.KnativeFleetMultipleLeaders.for))
  (dict "name" "KnativeFleetGitSyncFailing"
    "expr" (printf "knative_fleet_sync_failing{%s} == 1" $s)
    "summary" "The fleet repository has not synced for a while."
    "description" (printf "Every poll of the fleet repository by {{ $labels.instance }} has failed for %s (fetch, parse or mirror into the hub); the hub keeps the last good commit and nothing is pruned. The log line \"fleet sync failed\" and knative_fleet_git_fetch_errors_total say why." $r.KnativeFleetGitSyncFailing.for))
  (dict "name" "KnativeFleetStatusWriteBackFailing"
    "expr" (printf "knative_fleet_status_write_failing{%s} == 1" $s)
    "summary" "knative-fleet cannot commit the fleet status to Git."
    "description" (printf "The status write-back of {{ $labels.instance }} has failed for %s: the status files in the fleet repository are out of date. The log line \"status write-back failed\" says why (credentials without write access, a protected branch)." $r.KnativeFleetStatusWriteBackFailing.for))
  (dict "name" "KnativeFleetClusterNotReady"
    "expr" (printf "knative_fleet_spoke_ready{%s} == 0" $s)
    "summary" "A Knative component is not Ready on a cluster."
    "description" (printf "{{ $labels.kind }} on cluster {{ $labels.cluster }} has not been Ready for %s. `knative-fleet status` and the hub CR's conditions say which step is blocked." $r.KnativeFleetClusterNotReady.for))
  (dict "name" "KnativeFleetSpokeUnreachable"
    "expr" (printf "knative_fleet_spoke_reachable{%s} == 0" $s)
    "summary" "A spoke cluster cannot be reached."
    "description" (printf "Cluster {{ $labels.cluster }} has not answered knative-fleet for %s (connection refused, TLS or timeout): its CRs are retried with backoff. Check the ClusterProfile's server and the network path; `knative-fleet clusters` probes it." $r.KnativeFleetSpokeUnreachable.for))
  (dict "name" "KnativeFleetCredentialPluginFailing"
    "expr" (printf "increase(knative_fleet_exec_plugin_errors_total{%s}[10m]) / increase(knative_fleet_exec_plugin_duration_seconds_count{%s}[10m]) > %v" $s $s $r.KnativeFleetCredentialPluginFailing.ratio)
    "summary" "An access provider's credential plugin keeps failing."
    "description" (printf "More than %v of the runs of plugin {{ $labels.provider }} for cluster {{ $labels.cluster }} failed in the last 10 minutes, for %s: the cluster cannot be reached with a credential. The CR's TargetClusterResolved condition carries the plugin's message." (printf "%.0f%%" (mulf $r.KnativeFleetCredentialPluginFailing.ratio 100.0)) $r.KnativeFleetCredentialPluginFailing.for))
  (dict "name" "KnativeFleetReconcileErrorsHigh"
    "expr" (printf "sum by (namespace, job, instance) (rate(knative_fleet_reconcile_errors_total{%s}[10m])) / sum by (namespace, job, instance) (rate(knative_fleet_reconcile_duration_seconds_count{%s}[10m])) > %v" $s $s $r.KnativeFleetReconcileErrorsHigh.ratio)
    "summary" "Many reconciles fail."
    "description" (printf "More than %s of the reconciles of {{ $labels.instance }} failed over the last 10 minutes, for %s. knative_fleet_reconcile_errors_total by cluster and the ReconcileFailed Events say where." (printf "%.0f%%" (mulf $r.KnativeFleetReconcileErrorsHigh.ratio 100.0)) $r.KnativeFleetReconcileErrorsHigh.for))
  (dict "name" "KnativeFleetRolloutHalted"
    "expr" (printf "knative_fleet_rollout_halted{%s} == 1" $s)
    "summary" "The fleet rollout is halted."
    "description" "The rollout of the fleet repository's newest revision halted: a cluster of the open wave did not become healthy in time. The status file's Rollout section and the RolloutHalted Event name the cluster and why; fix it and push, or revert."
  )
  (dict "name" "KnativeFleetPruneHeld"
    "expr" (printf "knative_fleet_prune_pending{%s,state=\"held\"} > 0" $s)
    "summary" "A large prune waits for confirmation."
    "description" (printf "{{ $value }} hub CRs whose files left the fleet repository have waited %s for a person's confirmation (more than maxPruneFraction of the fleet would go). Confirm with the token in the status file, or restore the files." $r.KnativeFleetPruneHeld.for))
-}}
groups:
  - name: knative-fleet
    rules:
{{- range $alert := $alerts }}
{{- $settings := get $r $alert.name }}
{{- if $settings.enabled }}
      - alert: {{ $alert.name }}
        expr: {{ $alert.expr | quote }}
        for: {{ $settings.for }}
        labels:
          severity: {{ $settings.severity }}
          {{- with $.Values.alerts.labels }}
          {{- toYaml . | nindent 10 }}
          {{- end }}
        annotations:
          summary: {{ $alert.summary | quote }}
          description: {{ $alert.description | quote }}
          runbook_url: {{ printf "%s#%s" $.Values.alerts.runbookBaseUrl (lower $alert.name) | quote }}
{{- end }}
{{- end }}
{{- end }}
