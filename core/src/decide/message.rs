//! The words of a denial: what a locked write is told, and how much of the values it is shown.

use serde_json::Value;

use super::Locked;
use crate::fields_v1::describe_field_path;
use crate::index::ReleaseKey;
use crate::ownership::Change;
use crate::release::Status;

const MAX_CHANGES_IN_MESSAGE: usize = 5;

pub(super) fn headline(
    object: &str,
    release: &ReleaseKey,
    revision: u64,
    status: Status,
) -> String {
    format!("{object} is locked by Helm release {release} (revision {revision}, {status})")
}

/// The first [`MAX_CHANGES_IN_MESSAGE`] of `items`, then `and N more`.
fn first_few<T>(items: &[T], show: impl Fn(&T) -> String) -> Vec<String> {
    let mut shown: Vec<String> = items
        .iter()
        .take(MAX_CHANGES_IN_MESSAGE)
        .map(show)
        .collect();
    if items.len() > MAX_CHANGES_IN_MESSAGE {
        shown.push(format!("and {} more", items.len() - MAX_CHANGES_IN_MESSAGE));
    }
    shown
}

/// A write through another version of the kind than the chart's.
pub(super) fn other_version_message(l: &Locked, requested: &str, chart: &str) -> String {
    let mut paths = first_few(&l.changes, |c| c.path.clone());
    paths.dedup();
    format!(
        "{}: the chart writes it as version {chart} and this request uses {requested}, so every change outside metadata counts; this request changes {}. Change it with helm upgrade, or ask an admin.",
        l.headline(),
        paths.join(", ")
    )
}

/// A server-side apply that would make its manager a co-owner of fields Helm owns.
pub(super) fn co_owner_message(l: &Locked, manager: &str, shared: &[String]) -> String {
    let paths = first_few(shared, |p| describe_field_path(p));
    format!(
        "{}: this server-side apply by field manager \"{manager}\" claims {}, which Helm owns; a co-owner makes the next helm upgrade that changes them fail. Leave these fields out of what you apply, change them with helm upgrade, or ask an admin.",
        l.headline(),
        paths.join(", ")
    )
}

pub(super) fn scale_co_owner_message(l: &Locked, manager: &str, pointer: &str) -> String {
    format!(
        "{}: this write through /scale names field manager \"{manager}\"; from Kubernetes 1.22 a server-side apply there makes that manager own {pointer} beside Helm, and the next helm upgrade that changes it fails with a conflict. The replicas are already what you asked for: leave them to helm upgrade, or ask an admin.",
        l.headline(),
    )
}

pub(super) fn creator_message(l: &Locked, manager: &str, shared: &[String]) -> String {
    let paths = first_few(shared, |p| describe_field_path(p));
    format!(
        "{}: it is missing, and creating it as field manager \"{manager}\" makes that manager own {} beside Helm, so the next helm upgrade that changes them would fail with a conflict. Run helm upgrade, which recreates it, or ask an admin.",
        l.headline(),
        paths.join(", ")
    )
}

/// How a denial shows the requested values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wording {
    /// A Secret's values are not shown.
    pub hide_values: bool,
    /// A `scale` request: its `replicas` is omitempty, so a missing one is 0.
    pub scale: bool,
}

pub(super) fn message(
    object: &str,
    release: &ReleaseKey,
    revision: u64,
    status: Status,
    delete: bool,
    changes: &[Change],
    wording: Wording,
) -> String {
    let Wording { hide_values, scale } = wording;
    let head = headline(object, release, revision, status);
    if delete {
        return format!(
            "{head}: deleting it is not allowed. Remove it from the chart and run helm upgrade, or helm uninstall the release, or ask an admin."
        );
    }
    let parts = first_few(changes, |c| match &c.requested {
        Some(_) if hide_values => {
            format!("{} is set by the chart, this request changes it", c.path)
        }
        None if hide_values => {
            format!("{} is set by the chart, this request removes it", c.path)
        }
        Some(_) if c.chart.is_null() => format!(
            "{} repeats the key of another item (the next helm upgrade could not apply it)",
            c.path
        ),
        // A Scale's `replicas` is omitempty: `kubectl scale --replicas=0` sends none.
        None if scale => format!(
            "{} is {} in the chart, this request sets 0",
            c.path,
            show(&c.chart)
        ),
        Some(v) => match first_difference(&c.path, &c.chart, v) {
            Some(difference) => difference,
            None => format!(
                "{} is {} in the chart, this request sets {}",
                c.path,
                show(&c.chart),
                show(v)
            ),
        },
        None => format!(
            "{} is {} in the chart, this request removes it",
            c.path,
            show(&c.chart)
        ),
    });
    let hidden = if hide_values {
        " (a Secret's values are not shown)"
    } else {
        ""
    };
    format!(
        "{head}: {}{hidden}. Change it with helm upgrade, or ask an admin.",
        parts.join("; ")
    )
}

/// For a value too long to show whole (a ClusterRole's `rules`, a config file in a ConfigMap):
/// where the request first differs from the chart, the same prefix of both being no help.
/// `None` when both are short, or of different shapes.
pub(super) fn first_difference(path: &str, chart: &Value, requested: &Value) -> Option<String> {
    const SHORT: usize = 80;
    if chart.to_string().len() <= SHORT && requested.to_string().len() <= SHORT {
        return None;
    }
    match (chart, requested) {
        (Value::String(a), Value::String(b)) if a.contains('\n') || b.contains('\n') => {
            let (mut left, mut right) = (a.lines(), b.lines());
            for line in 1.. {
                match (left.next(), right.next()) {
                    (Some(x), Some(y)) if x == y => continue,
                    (Some(x), Some(y)) => {
                        return Some(format!(
                            "{path} differs from the chart at line {line}: {} in the chart, {} in this request",
                            show(&Value::from(x)),
                            show(&Value::from(y))
                        ))
                    }
                    (Some(x), None) => {
                        return Some(format!(
                            "{path} differs from the chart at line {line}: {} in the chart, the request ends before it",
                            show(&Value::from(x))
                        ))
                    }
                    (None, Some(y)) => {
                        return Some(format!(
                            "{path} differs from the chart at line {line}: the chart ends before it, this request adds {}",
                            show(&Value::from(y))
                        ))
                    }
                    (None, None) => return None,
                }
            }
            None
        }
        (Value::Array(a), Value::Array(b)) => {
            let i = a.iter().zip(b).take_while(|(x, y)| x == y).count();
            Some(match (a.get(i), b.get(i)) {
                (Some(x), Some(y)) => {
                    let item = format!("{path}/{i}");
                    first_difference(&item, x, y).unwrap_or_else(|| {
                        format!(
                            "{item} is {} in the chart, this request sets {}",
                            show(x),
                            show(y)
                        )
                    })
                }
                (Some(x), None) => format!(
                    "{path}/{i} is {} in the chart, this request removes it ({} items instead of {})",
                    show(x),
                    b.len(),
                    a.len()
                ),
                (None, Some(y)) => format!(
                    "{path} has {} items in the chart, this request adds {} at {path}/{i}",
                    a.len(),
                    show(y)
                ),
                (None, None) => return None,
            })
        }
        (Value::Object(a), Value::Object(b)) => {
            let key = a.keys().chain(b.keys()).find(|k| a.get(*k) != b.get(*k))?;
            let item = format!("{path}{}", crate::ownership::pointer_segment(key));
            Some(match (a.get(key), b.get(key)) {
                (Some(x), Some(y)) => first_difference(&item, x, y).unwrap_or_else(|| {
                    format!(
                        "{item} is {} in the chart, this request sets {}",
                        show(x),
                        show(y)
                    )
                }),
                (Some(x), None) => {
                    format!(
                        "{item} is {} in the chart, this request removes it",
                        show(x)
                    )
                }
                (None, Some(y)) => {
                    format!("{item} is not in the chart, this request adds {}", show(y))
                }
                (None, None) => return None,
            })
        }
        _ => None,
    }
}

fn show(value: &Value) -> String {
    const MAX: usize = 80;
    let text = value.to_string();
    if text.len() <= MAX {
        return text;
    }
    let cut = (0..=MAX)
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    format!("{}...", &text[..cut])
}
