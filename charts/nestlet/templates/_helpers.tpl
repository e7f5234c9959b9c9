{{/*
Names. Every object is called "<fullname>-<component>"; fullname is the
release name, or "<release>-nestlet" when the release name does not contain
the chart name.
*/}}
{{- define "nestlet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "nestlet.fullname" -}}
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

{{/* "<fullname>-<component>"; call with (dict "ctx" $ "component" "agent"). */}}
{{- define "nestlet.componentName" -}}
{{- printf "%s-%s" (include "nestlet.fullname" .ctx | trunc 50 | trimSuffix "-") .component }}
{{- end }}

{{- define "nestlet.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object; call with (dict "ctx" $ "component" "agent"). */}}
{{- define "nestlet.labels" -}}
helm.sh/chart: {{ include "nestlet.chart" .ctx }}
{{ include "nestlet.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: nestlet
{{- end }}

{{/* Labels that select a component's pods. */}}
{{- define "nestlet.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nestlet.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* The one image holding every binary under /usr/local/bin. */}}
{{- define "nestlet.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Pod-level settings shared by the components' Deployments. */}}
{{- define "nestlet.podSpecCommon" -}}
{{- with .ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .ctx.Values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Lease the scheduler's replicas elect a leader with. */}}
{{- define "nestlet.scheduler.leaseName" -}}
{{- include "nestlet.componentName" (dict "ctx" . "component" "scheduler") }}
{{- end }}

{{/*
Name of the Target of one entry of .Values.targets: its name, else what
`nestctl join` would choose ("parent-" and the parent's host and port).
*/}}
{{- define "nestlet.targetName" -}}
{{- if .name }}
{{- .name }}
{{- else }}
{{- $host := (urlParse .parentURL).host | lower }}
{{- printf "parent-%s" ($host | replace ":" "-" | replace "." "-" | replace "[" "" | replace "]" "") }}
{{- end }}
{{- end }}
