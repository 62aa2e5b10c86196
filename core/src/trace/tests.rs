use super::*;
use crate::chart::{CHART_VALUES, RELEASE_CONFIG};

/// Traces `path` of the object of `kind` that template `source` renders, without the rendered
/// object or the field's value (what [`trace_change`] adds).
fn trace(templates: &Templates, source: &str, kind: &str, path: &str) -> Trace {
    trace_in(templates, source, kind, path, None, true)
}

fn chart(files: &[(&str, &str)]) -> Templates {
    files
        .iter()
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect()
}

const HELPERS: &str = r#"{{- define "shop.fullname" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 }}
{{- end }}
{{- define "shop.labels" -}}
app: {{ include "shop.fullname" . }}
tier: {{ .Values.tier | quote }}
{{- end }}
"#;

const DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "shop.fullname" . }}
  labels:
    {{- include "shop.labels" . | nindent 4 }}
  annotations:
    {{- range $key, $value := .Values.podAnnotations }}
    {{ $key }}: {{ $value | quote }}
    {{- end }}
spec:
  {{- if not .Values.autoscaling.enabled }}
  replicas: {{ .Values.replicaCount | default 1 }}
  {{- end }}
  template:
    spec:
      containers:
        - name: web
          image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
          {{- with .Values.web }}
          args: ["--port={{ .port }}"]
          {{- end }}
          resources:
            {{- toYaml .Values.resources | nindent 12 }}
      {{- with .Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      terminationGracePeriodSeconds: 30
      securityContext: {runAsNonRoot: true, runAsUser: 1000}
"#;

fn shop() -> Templates {
    chart(&[
        ("templates/_helpers.tpl", HELPERS),
        ("templates/deployment.yaml", DEPLOYMENT),
    ])
}

fn keys(path: &str) -> Vec<String> {
    trace(
        &shop(),
        "shop/templates/deployment.yaml",
        "Deployment",
        path,
    )
    .keys
}

#[test]
fn a_value_on_the_line_with_default_and_pipelines() {
    let t = trace(
        &shop(),
        "shop/templates/deployment.yaml",
        "Deployment",
        "/spec/replicas",
    );
    assert_eq!(t.keys, ["replicaCount"]);
    assert_eq!(t.line, Some(13));
    assert_eq!(t.to_string(), "values: replicaCount");
    assert_eq!(
        keys("/spec/template/spec/containers/0/image"),
        ["image.repository", "image.tag"]
    );
}

#[test]
fn with_makes_relative_keys_absolute() {
    assert_eq!(keys("/spec/template/spec/containers/0/args"), ["web.port"]);
}

#[test]
fn to_yaml_under_a_key_traces_the_rest_of_the_path() {
    assert_eq!(
        keys("/spec/template/spec/containers/0/resources/limits/cpu"),
        ["resources.limits.cpu"]
    );
    assert_eq!(
        keys("/spec/template/spec/tolerations/1/effect"),
        ["tolerations[1].effect"]
    );
}

#[test]
fn include_is_followed_into_its_define() {
    assert_eq!(keys("/metadata/name"), ["nameOverride"]);
    assert_eq!(keys("/metadata/labels/tier"), ["tier"]);
    assert_eq!(keys("/metadata/labels/app"), ["nameOverride"]);
}

#[test]
fn range_over_a_map_traces_each_key() {
    assert_eq!(
        keys("/metadata/annotations/prometheus.io~1scrape"),
        ["podAnnotations.prometheus\\.io/scrape"]
    );
}

#[test]
fn what_cannot_be_followed_names_the_template_and_line() {
    let t = trace(
        &shop(),
        "shop/templates/deployment.yaml",
        "Deployment",
        "/spec/template/spec/terminationGracePeriodSeconds",
    );
    assert!(t.keys.is_empty());
    assert_eq!(t.line, Some(29));
    assert_eq!(
        t.to_string(),
        "set in shop/templates/deployment.yaml line 29"
    );
    let missing = trace(
        &shop(),
        "shop/templates/other.yaml",
        "Deployment",
        "/spec/replicas",
    );
    assert_eq!(missing.to_string(), "set in shop/templates/other.yaml");
}

/// The chart's templates as Helm stores them, read from a chart folder.
fn chart_folder(chart: &str) -> Templates {
    fn walk(dir: &std::path::Path, root: &std::path::Path, out: &mut Templates) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, root, out);
            } else {
                let name = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(name, std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/e2e/charts")
        .join(chart);
    let mut out = Templates::new();
    walk(&root.join("templates"), &root, &mut out);
    out
}

/// The end-to-end tests' charts written the way published charts are: helpers, `toYaml`
/// blocks, `with`, `range`, nested values (tests/e2e/charts/README.md).
#[test]
fn e2e_charts_trace_their_common_knobs() {
    let cases = [
        (
            "webapp",
            "deployment.yaml",
            "/spec/replicas",
            "replicaCount",
        ),
        (
            "webapp",
            "deployment.yaml",
            "/spec/template/spec/containers/0/resources/limits/cpu",
            "resources.limits.cpu",
        ),
        (
            "webapp",
            "deployment.yaml",
            "/spec/template/spec/tolerations/0/key",
            "tolerations[0].key",
        ),
        (
            "webapp",
            "deployment.yaml",
            "/spec/template/spec/nodeSelector/disktype",
            "nodeSelector.disktype",
        ),
        (
            "webapp",
            "deployment.yaml",
            "/spec/template/spec/containers/0/imagePullPolicy",
            "image.pullPolicy",
        ),
        (
            "webapp",
            "deployment.yaml",
            "/spec/template/metadata/annotations/team",
            "podAnnotations.team",
        ),
        (
            "webapp",
            "deployment.yaml",
            "/spec/template/metadata/annotations/prometheus.io~1port",
            "service.httpPort",
        ),
        (
            "metrics-agent",
            "deployment.yaml",
            "/spec/replicas",
            "replicas",
        ),
        (
            "metrics-agent",
            "deployment.yaml",
            "/spec/template/spec/containers/0/image",
            "image.repository",
        ),
        (
            "metrics-agent",
            "deployment.yaml",
            "/spec/template/spec/containers/0/resources/requests/cpu",
            "resources.requests.cpu",
        ),
        (
            "edge-proxy",
            "controller-deployment.yaml",
            "/spec/replicas",
            "controller.replicaCount",
        ),
        (
            "edge-proxy",
            "controller-deployment.yaml",
            "/spec/template/spec/dnsPolicy",
            "controller.dnsPolicy",
        ),
        (
            "edge-proxy",
            "controller-deployment.yaml",
            "/spec/template/spec/terminationGracePeriodSeconds",
            "controller.terminationGracePeriodSeconds",
        ),
        (
            "edge-proxy",
            "controller-deployment.yaml",
            "/spec/template/spec/containers/0/resources/requests/memory",
            "controller.resources.requests.memory",
        ),
        (
            "edge-proxy",
            "controller-deployment.yaml",
            "/spec/template/spec/nodeSelector/kubernetes.io~1os",
            "controller.nodeSelector.kubernetes\\.io/os",
        ),
    ];
    let mut wrong = Vec::new();
    for (chart, file, path, key) in cases {
        let templates = chart_folder(chart);
        let t = trace(
            &templates,
            &format!("{chart}/templates/{file}"),
            "Deployment",
            path,
        );
        if !t.keys.iter().any(|k| k == key) {
            wrong.push(format!("{chart} {path}: {t:?}, expected {key}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn advice_names_the_keys_and_gives_the_upgrade() {
    let manifest = "---\n# Source: shop/templates/deployment.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n";
    let files = crate::chart::ChartFiles {
        chart: "shop".into(),
        manifest: manifest.into(),
        templates: shop(),
        ..Default::default()
    };
    let release = crate::release::ReleaseKey::new("prod", "shop");
    let change = |path: &str, requested: serde_json::Value| crate::ownership::Change {
        path: path.into(),
        chart: serde_json::Value::Null,
        requested: Some(requested),
    };
    let changes = [
        change("/spec/replicas", serde_json::json!(7)),
        change(
            "/spec/template/spec/containers/0/resources/limits/cpu",
            serde_json::json!("2, or 3"),
        ),
        change(
            "/spec/template/spec/terminationGracePeriodSeconds",
            serde_json::json!(5),
        ),
    ];
    let advice = advice(&files, &release, "Deployment", "web", &changes, false).unwrap();
    assert_eq!(
            advice,
            "In the chart: /spec/replicas comes from values replicaCount; /spec/template/spec/containers/0/resources/limits/cpu comes from values resources.limits.cpu; /spec/template/spec/terminationGracePeriodSeconds is set in shop/templates/deployment.yaml line 29. To change it the right way: helm upgrade shop <shop chart> -n prod --reuse-values --set replicaCount=7 --set resources.limits.cpu='2\\, or 3'"
        );
    // A Secret's values stay out of the message.
    let hidden = super::advice(&files, &release, "Deployment", "web", &changes[..1], true).unwrap();
    assert_eq!(
        hidden,
        "In the chart: /spec/replicas comes from values replicaCount."
    );
    // An object the manifest does not render: nothing to say.
    assert_eq!(
        super::advice(&files, &release, "Deployment", "other", &changes, false),
        None
    );
}

/// A release recorded from a real cluster: its chart renders several objects from one file.
#[test]
fn a_recorded_release_traces_through_a_file_of_several_documents() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/cluster-capture/releases/02-after-upgrade.json"
    ))
    .unwrap();
    let secrets: serde_json::Value = serde_json::from_str(&text).unwrap();
    let secret = secrets["items"]
        .as_array()
        .and_then(|items| items.last())
        .unwrap_or(&secrets);
    let files =
        crate::chart::decode_chart_files(secret["data"]["release"].as_str().unwrap()).unwrap();
    assert_eq!(files.chart, "shop");
    // The release's values come along, and the hints below are checked against them.
    assert!(files.templates.contains_key(CHART_VALUES));
    let source = source_of(&files.manifest, "ConfigMap", "shop-config").unwrap();
    assert_eq!(source, "shop/templates/app.yaml");
    let t = trace(&files.templates, &source, "ConfigMap", "/data/greeting");
    assert_eq!(t.keys, ["greeting"], "{t:?}");
    let mode = trace(&files.templates, &source, "ConfigMap", "/data/mode");
    assert_eq!((mode.keys.len(), mode.line), (0, Some(11)));
    let name = trace(&files.templates, &source, "Deployment", "/metadata/name");
    assert!(
        name.keys.is_empty() && name.line.is_some_and(|l| l > 15),
        "{name:?}"
    );
}

#[test]
fn every_key_an_object_reads() {
    assert_eq!(
        values_read(&shop(), "shop/templates/deployment.yaml", "Deployment"),
        [
            "nameOverride",
            "tier",
            "podAnnotations",
            "replicaCount",
            "image.repository",
            "image.tag",
            "web.port",
            "resources",
            "tolerations"
        ]
    );
    assert!(values_read(&shop(), "shop/templates/none.yaml", "Deployment").is_empty());
}

/// A chart shaped like the public charts whose hints were wrong: containers under `if`,
/// env lists that mix `range` items with literal ones, `toYaml` lists after literal
/// items, an `if` that drops a port before the traced one, `range` over a list.
const POD: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: graf
spec:
  replicas: {{ .Values.replicas }}
  template:
    spec:
      containers:
        {{- if .Values.sidecar.enabled }}
        - name: sidecar
          image: {{ .Values.sidecar.image }}
          env:
            - name: METHOD
              value: {{ .Values.sidecar.watchMethod }}
          securityContext:
            {{- toYaml .Values.sidecar.securityContext | nindent 12 }}
        {{- end }}
        - name: grafana
          image: {{ .Values.image }}
          env:
            {{- range $key, $value := .Values.env }}
            - name: {{ $key }}
              value: {{ $value | quote }}
            {{- end }}
            - name: GF_PATHS_DATA
              value: {{ .Values.paths.data }}
            - name: GF_LOG_LEVEL
              value: {{ .Values.log.level }}
            {{- range .Values.extraEnv }}
            - name: {{ .name }}
              value: {{ .value | quote }}
            {{- end }}
          ports:
            {{- if .Values.metrics.enabled }}
            - name: metrics
              containerPort: {{ .Values.metrics.port }}
            {{- end }}
            - name: http
              containerPort: {{ .Values.service.port }}
          volumeMounts:
            - name: data
              mountPath: /var/lib/grafana
            {{- with .Values.extraMounts }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          securityContext:
            {{- toYaml .Values.securityContext | nindent 12 }}
        {{- with .Values.extraContainers }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
"#;

const INGRESS: &str = r#"apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: graf
spec:
  rules:
    - host: {{ .Values.host | quote }}
      http:
        paths:
          - path: /
            pathType: Prefix
"#;

fn graf(values: Option<serde_json::Value>) -> Templates {
    let mut t = chart(&[
        ("templates/deployment.yaml", POD),
        ("templates/ingress.yaml", INGRESS),
    ]);
    if let Some(values) = values {
        t.insert(CHART_VALUES.into(), values.to_string());
    }
    t
}

fn graf_values() -> serde_json::Value {
    serde_json::json!({
        "replicas": 1,
        "image": "grafana:11",
        "host": "grafana.example.com",
        "sidecar": {"enabled": true, "image": "k8s-sidecar", "watchMethod": "WATCH",
                    "securityContext": {"runAsUser": 65534}},
        "env": {"GF_FEATURE": "on"},
        "paths": {"data": "/var/lib/grafana"},
        "log": {"level": "info"},
        "extraEnv": [{"name": "EXTRA", "value": "1"}],
        "metrics": {"enabled": true, "port": 9090},
        "service": {"port": 3000},
        "extraMounts": [{"name": "dash", "mountPath": "/dash"}],
        "securityContext": {"runAsUser": 472},
        "extraContainers": [{"name": "proxy", "image": "envoy", "args": ["--v=2"]}]
    })
}

/// The object as the chart renders with [`graf_values`].
fn graf_rendered() -> serde_json::Value {
    serde_json::json!({"spec": {"replicas": 1, "template": {"spec": {"containers": [
        {"name": "sidecar", "image": "k8s-sidecar",
         "env": [{"name": "METHOD", "value": "WATCH"}],
         "securityContext": {"runAsUser": 65534}},
        {"name": "grafana", "image": "grafana:11",
         "env": [{"name": "GF_FEATURE", "value": "on"},
                 {"name": "GF_PATHS_DATA", "value": "/var/lib/grafana"},
                 {"name": "GF_LOG_LEVEL", "value": "info"},
                 {"name": "EXTRA", "value": "1"}],
         "ports": [{"name": "metrics", "containerPort": 9090},
                   {"name": "http", "containerPort": 3000}],
         "volumeMounts": [{"name": "data", "mountPath": "/var/lib/grafana"},
                          {"name": "dash", "mountPath": "/dash"}],
         "securityContext": {"runAsUser": 472}},
        {"name": "proxy", "image": "envoy", "args": ["--v=2"]}
    ]}}}})
}

fn graf_trace(templates: &Templates, path: &str) -> Trace {
    trace(
        templates,
        "graf/templates/deployment.yaml",
        "Deployment",
        path,
    )
}

/// With the rendered object: the field's chart value is read from it.
fn graf_change(templates: &Templates, path: &str) -> Trace {
    let rendered = graf_rendered();
    let (_, chart) = wants(
        &path.split('/').skip(1).collect::<Vec<_>>(),
        Some(&rendered),
        true,
    );
    let chart = chart.cloned().unwrap_or_default();
    trace_change(
        templates,
        "graf/templates/deployment.yaml",
        "Deployment",
        path,
        Some(&rendered),
        &chart,
    )
}

/// grafana's GF_LOG_LEVEL was said to come from `sidecar.dashboards.watchMethod`: the
/// first `value:` of any env list, where containers and env items are conditional.
#[test]
fn items_after_a_conditional_or_a_range_are_not_matched_by_position() {
    for templates in [graf(None), graf(Some(graf_values()))] {
        let level = graf_trace(&templates, "/spec/template/spec/containers/1/env/2/value");
        assert!(level.keys.is_empty(), "{level:?}");
        assert!(!level.to_string().contains("watchMethod"), "{level}");
        // An item `range` writes: the key is an item of `env`, not `env`.
        let ranged = graf_trace(&templates, "/spec/template/spec/containers/1/env/0/value");
        assert!(ranged.keys.is_empty(), "{ranged:?}");
        // `range` over a list: never `extraEnv.value`, a key that does not exist.
        let extra = graf_trace(&templates, "/spec/template/spec/containers/1/env/3/value");
        assert!(extra.keys.is_empty(), "{extra:?}");
        // An `if` drops the metrics port before the http one.
        let port = graf_trace(
            &templates,
            "/spec/template/spec/containers/1/ports/1/containerPort",
        );
        assert!(port.keys.is_empty(), "{port:?}");
        // What is certain still is: a field of the document, a literal first item.
        assert_eq!(graf_trace(&templates, "/spec/replicas").keys, ["replicas"]);
    }
}

/// Knowing the rendered object, an item with a literal `name:` is found by it wherever
/// it lands, and its key is checked against the values.
#[test]
fn items_with_a_literal_name_are_found_by_it() {
    let templates = graf(Some(graf_values()));
    let level = graf_change(&templates, "/spec/template/spec/containers/1/env/2/value");
    assert_eq!(level.keys, ["log.level"], "{level:?}");
    let port = graf_change(
        &templates,
        "/spec/template/spec/containers/1/ports/1/containerPort",
    );
    assert_eq!(port.keys, ["service.port"], "{port:?}");
    let method = graf_change(&templates, "/spec/template/spec/containers/0/env/0/value");
    assert_eq!(method.keys, ["sidecar.watchMethod"], "{method:?}");
    // Items written by `range` have no literal name: still nothing.
    let ranged = graf_change(&templates, "/spec/template/spec/containers/1/env/0/value");
    assert!(ranged.keys.is_empty(), "{ranged:?}");
    let extra = graf_change(&templates, "/spec/template/spec/containers/1/env/3/value");
    assert!(extra.keys.is_empty(), "{extra:?}");
}

/// `volumeMounts[0].args`, `securityContext[0].args`: a `toYaml` deeper under a list
/// was taken for the list's own items.
#[test]
fn to_yaml_lists_count_from_where_they_start() {
    let templates = graf(Some(graf_values()));
    let args = graf_trace(&templates, "/spec/template/spec/containers/2/args/0");
    assert!(
        !args
            .keys
            .iter()
            .any(|k| k.contains("volumeMounts") || k.contains("securityContext")),
        "{args:?}"
    );
    // The containers before `extraContainers` are conditional: its first item's
    // position is not certain.
    assert!(args.keys.is_empty(), "{args:?}");
    // A mount after the literal one comes from `extraMounts[0]`, not `extraMounts[1]`.
    for t in [graf(None), graf(Some(graf_values()))] {
        let mount = graf_change(
            &t,
            "/spec/template/spec/containers/1/volumeMounts/1/mountPath",
        );
        assert_eq!(mount.keys, ["extraMounts[0].mountPath"], "{mount:?}");
        let literal = graf_change(
            &t,
            "/spec/template/spec/containers/1/volumeMounts/0/mountPath",
        );
        assert!(literal.keys.is_empty(), "{literal:?}");
        assert_eq!(literal.line, Some(43));
    }
    // The rendered object names the container: its securityContext is the chart's.
    let security = graf_change(
        &templates,
        "/spec/template/spec/containers/1/securityContext/runAsUser",
    );
    assert_eq!(security.keys, ["securityContext.runAsUser"], "{security:?}");
    let sidecar = graf_change(
        &templates,
        "/spec/template/spec/containers/0/securityContext/runAsUser",
    );
    assert_eq!(
        sidecar.keys,
        ["sidecar.securityContext.runAsUser"],
        "{sidecar:?}"
    );
    // With no list before it, `extraContainers` items are tied to their index.
    let only = chart(&[(
            "templates/d.yaml",
            "kind: Deployment\nspec:\n  containers:\n    {{- toYaml .Values.extraContainers | nindent 4 }}\n  securityContext:\n    {{- toYaml .Values.securityContext | nindent 4 }}\n",
        )]);
    let t = trace(
        &only,
        "c/templates/d.yaml",
        "Deployment",
        "/spec/containers/0/args",
    );
    assert_eq!(t.keys, ["extraContainers[0].args"]);
}

/// A field of an atomic list item (an Ingress rule's host) still names its key.
#[test]
fn a_field_in_an_atomic_item_names_its_key_when_certain() {
    let templates = graf(Some(graf_values()));
    let rendered = serde_json::json!({"spec": {"rules": [{"host": "grafana.example.com",
            "http": {"paths": [{"path": "/", "pathType": "Prefix"}]}}]}});
    let t = trace_change(
        &templates,
        "graf/templates/ingress.yaml",
        "Ingress",
        "/spec/rules/0/host",
        Some(&rendered),
        &serde_json::json!("grafana.example.com"),
    );
    assert_eq!(t.keys, ["host"], "{t:?}");
    let plain = trace(
        &templates,
        "graf/templates/ingress.yaml",
        "Ingress",
        "/spec/rules/0/host",
    );
    assert_eq!(plain.keys, ["host"]);
}

/// A host changed inside an atomic list (an Ingress's `rules`, no merge key): the denial
/// follows the one changed leaf to the value it is written from.
#[test]
fn a_value_inside_an_atomic_list_names_its_key_and_the_set() {
    let templates = graf(Some(graf_values()));
    let manifest = "---\n# Source: graf/templates/ingress.yaml\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: graf\nspec:\n  rules:\n  - host: grafana.example.com\n    http:\n      paths:\n      - path: /\n        pathType: Prefix\n";
    let files = crate::chart::ChartFiles {
        chart: "graf".into(),
        manifest: manifest.into(),
        templates,
        ..Default::default()
    };
    let release = crate::release::ReleaseKey::new("mon", "graf");
    let rule = |host: &str| serde_json::json!([{"host": host, "http": {"paths": [{"path": "/", "pathType": "Prefix"}]}}]);
    let change = crate::ownership::Change {
        path: "/spec/rules".into(),
        chart: rule("grafana.example.com"),
        requested: Some(rule("evil.example.com")),
    };
    let advice = advice(
        &files,
        &release,
        "Ingress",
        "graf",
        std::slice::from_ref(&change),
        false,
    )
    .unwrap();
    assert!(
        advice.contains("/spec/rules/0/host comes from values host"),
        "{advice}"
    );
    assert!(
        advice.ends_with("--reuse-values --set host=evil.example.com"),
        "{advice}"
    );
    // Two leaves changed, or an item added: the list as a whole, as before.
    let mut two = rule("evil.example.com");
    two[0]["http"]["paths"][0]["path"] = serde_json::json!("/x");
    let added = serde_json::json!([rule("a")[0], rule("b")[0]]);
    for requested in [two, added] {
        let whole = crate::ownership::Change {
            requested: Some(requested),
            ..change.clone()
        };
        assert_eq!(changed_leaf(&whole), None);
    }
}

/// A key not in the release's values, or whose value there is not the field's, is not
/// named; the release's config counts over the chart's defaults.
#[test]
fn hints_are_checked_against_the_release_values() {
    let mut values = graf_values();
    values["log"] = serde_json::json!({});
    let templates = graf(Some(values));
    let level = graf_change(&templates, "/spec/template/spec/containers/1/env/2/value");
    assert!(level.keys.is_empty(), "{level:?}");
    // The chart renders 1 replica; values that say 4 are not what rendered it.
    let mut four = graf(Some(graf_values()));
    four.insert(RELEASE_CONFIG.into(), r#"{"replicas": 4}"#.into());
    assert!(graf_change(&four, "/spec/replicas").keys.is_empty());
    // The config is what rendered it.
    let mut one = graf(Some(serde_json::json!({"replicas": 4})));
    one.insert(RELEASE_CONFIG.into(), r#"{"replicas": 1}"#.into());
    assert_eq!(graf_change(&one, "/spec/replicas").keys, ["replicas"]);
    // A scalar field is not a map's key, a `null` in the config deletes a default.
    let mut gone = graf(Some(graf_values()));
    gone.insert(RELEASE_CONFIG.into(), r#"{"image": null}"#.into());
    let image = graf_change(&gone, "/spec/template/spec/containers/1/image");
    assert!(image.keys.is_empty(), "{image:?}");
    let mut map = graf(Some(graf_values()));
    map.insert(RELEASE_CONFIG.into(), r#"{"image": {"tag": "11"}}"#.into());
    let image = graf_change(&map, "/spec/template/spec/containers/1/image");
    assert!(image.keys.is_empty(), "{image:?}");
    // Keys in --set syntax are looked up as --set reads them.
    let v = serde_json::json!({"a": {"b.c": [1, {"d": 2}]}});
    assert_eq!(lookup(&v, "a.b\\.c[1].d"), Some(&serde_json::json!(2)));
    assert_eq!(lookup(&v, "a.b\\.c[2]"), None);
}

/// A key read through a function is named only when its value shows in the field's, and
/// `--set` is offered only where setting the key writes the field (found on public charts
/// on a cluster: an empty `nameOverride` under a chart-named label, a config key under the
/// config's checksum, both with a `--set` that would have renamed or broken the release).
#[test]
fn a_key_read_through_a_function_is_named_only_when_its_value_shows() {
    const TEMPLATE: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels:\n    app.kubernetes.io/name: {{ default .Chart.Name .Values.nameOverride }}\nspec:\n  replicas: {{ .Values.replicaCount | default 1 }}\n  template:\n    metadata:\n      annotations:\n        checksum/config: {{ .Values.config.file | sha256sum }}\n    spec:\n      containers:\n      - name: web\n        image: {{ printf \"%s:%s\" .Values.image.repository .Values.image.tag }}\n";
    let mut templates = chart(&[("templates/deployment.yaml", TEMPLATE)]);
    templates.insert(
        CHART_VALUES.into(),
        serde_json::json!({"nameOverride": "", "replicaCount": 3, "config": {"file": "a: 1"},
                               "image": {"repository": "nginx", "tag": "1.25"}})
        .to_string(),
    );
    let rendered = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app.kubernetes.io/name": "web"}},
            "spec": {"replicas": 3, "template": {"metadata": {"annotations": {"checksum/config": "9f2c"}},
                     "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}}}});
    let at = |path: &str| {
        let chart = rendered.pointer(path).cloned().unwrap();
        trace_change(
            &templates,
            "web/templates/deployment.yaml",
            "Deployment",
            path,
            Some(&rendered),
            &chart,
        )
    };
    let label = at("/metadata/labels/app.kubernetes.io~1name");
    assert!(label.keys.is_empty(), "{label:?}");
    let checksum = at("/spec/template/metadata/annotations/checksum~1config");
    assert!(checksum.keys.is_empty(), "{checksum:?}");
    let replicas = at("/spec/replicas");
    assert_eq!(
        (replicas.keys.as_slice(), replicas.exact),
        (&["replicaCount".to_string()][..], true)
    );
    let image = at("/spec/template/spec/containers/0/image");
    assert_eq!(image.keys, ["image.repository", "image.tag"]);
    assert!(!image.exact);
}

/// The request's list indexes are not the chart's when the request moved items: no
/// position is trusted then.
#[test]
fn a_request_that_moves_items_gets_no_positional_key() {
    let templates = graf(Some(graf_values()));
    let rendered = graf_rendered();
    // The request put a new env var first: its env/3 is the chart's GF_LOG_LEVEL.
    let t = trace_change(
        &templates,
        "graf/templates/deployment.yaml",
        "Deployment",
        "/spec/template/spec/containers/1/volumeMounts/1/mountPath",
        Some(&rendered),
        &serde_json::json!("/var/lib/grafana"),
    );
    assert!(t.keys.is_empty(), "{t:?}");
}

/// An Ingress host read from `$.Values.host` in every rule a `range` writes: whichever rule
/// it is, the key is `host`. Where the rules' items do not all write it from the same key
/// (a literal rule, a `toYaml` splice, a `range` item's own field), no key is named.
#[test]
fn a_root_value_written_in_every_item_of_a_list_names_its_key_at_any_position() {
    const HEAD: &str =
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: web\nspec:\n";
    let named = |body: &str, path: &str| {
        let templates = chart(&[("templates/ingress.yaml", &format!("{HEAD}{body}"))]);
        trace(&templates, "c/templates/ingress.yaml", "Ingress", path).keys
    };
    let ranged = "  rules:\n  {{- range .Values.paths }}\n  - host: {{ $.Values.host | quote }}\n    http:\n      paths:\n      - path: {{ . }}\n  {{- end }}\n";
    let withed = "  rules:\n  {{- with .Values.host }}\n  - host: {{ . }}\n  {{- end }}\n";
    let under_with = "  {{- with .Values.ingress }}\n  rules:\n  - host: {{ $.Values.host }}\n    http:\n      paths:\n      - path: {{ .path }}\n  {{- end }}\n";
    for path in ["/spec/rules/0/host", "/spec/rules/3/host"] {
        assert_eq!(named(ranged, path), ["host"], "{path}");
        assert_eq!(named(withed, path), ["host"], "{path}");
    }
    assert_eq!(named(under_with, "/spec/rules/0/host"), ["host"]);
    assert!(
        named(under_with, "/spec/rules/1/host").is_empty(),
        "no second rule is written"
    );
    let none: [&str; 4] = [
            // A literal rule besides the ranged ones.
            "  rules:\n  - host: static.example.com\n  {{- range .Values.paths }}\n  - host: {{ $.Values.host }}\n  {{- end }}\n",
            // Rules spliced in from values.
            "  rules:\n    {{- range .Values.paths }}\n    - host: {{ $.Values.host }}\n    {{- end }}\n    {{- with .Values.extraRules }}\n    {{- toYaml . | nindent 4 }}\n    {{- end }}\n",
            "  rules:\n  {{- range .Values.paths }}\n  - host: {{ $.Values.host }}\n  {{- end }}\n  {{- toYaml .Values.extraRules | nindent 2 }}\n",
            // Each rule's own host: `hosts[i].host`, with i not certain.
            "  rules:\n  {{- range .Values.hosts }}\n  - host: {{ .host }}\n  {{- end }}\n",
        ];
    for body in none {
        assert!(named(body, "/spec/rules/1/host").is_empty(), "{body}");
    }
    // With the release's values: named only when the value matches the rendered host.
    let mut templates = chart(&[("templates/ingress.yaml", &format!("{HEAD}{ranged}"))]);
    templates.insert(
        CHART_VALUES.into(),
        r#"{"host": "shop.example.com", "paths": ["/a", "/b"]}"#.into(),
    );
    let rendered = serde_json::json!({"spec": {"rules": [
            {"host": "shop.example.com", "http": {"paths": [{"path": "/a"}]}},
            {"host": "shop.example.com", "http": {"paths": [{"path": "/b"}]}}]}});
    let change = |chart: &str| {
        trace_change(
            &templates,
            "c/templates/ingress.yaml",
            "Ingress",
            "/spec/rules/1/host",
            Some(&rendered),
            &serde_json::json!(chart),
        )
    };
    let t = change("shop.example.com");
    assert_eq!(
        (t.keys.as_slice(), t.exact),
        (&["host".to_string()][..], true)
    );
}
