//! What a comparison with the chart reports: a locked change, an owned value beside the chart's,
//! and the JSON patch that puts changes back.

use serde_json::Value;

/// A locked path the request changes away from the chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// JSON pointer into the request's object (`-` for a list item the request removed).
    pub path: String,
    /// The chart's value; `null` for an item the request adds that repeats the key of a chart
    /// item (the chart has no such item: repair removes it).
    pub chart: Value,
    /// The requested value; `None` when the request removes the field.
    pub requested: Option<Value>,
}

/// One value Helm owns in a live object, with the chart's value and the live one (`kubectl
/// locker why`).
#[derive(Clone, Debug, PartialEq)]
pub struct OwnedValue {
    /// JSON pointer into the live object (`-` for a chart item the live object lacks).
    pub path: String,
    pub chart: Value,
    /// `None` when the live object lacks the field.
    pub live: Option<Value>,
    /// Whether the live value differs from the chart's: exactly the paths of
    /// [`drifted_fields`](super::drifted_fields).
    pub differs: bool,
}

/// A JSON patch that puts every changed field back to the chart's value.
pub(crate) fn repair_patch(changes: &[Change]) -> json_patch::Patch {
    use json_patch::{AddOperation, PatchOperation, RemoveOperation, ReplaceOperation};
    let ops = changes
        .iter()
        .filter_map(|change| {
            let path = json_patch::jsonptr::PointerBuf::parse(change.path.clone()).ok()?;
            let value = change.chart.clone();
            Some(match change.requested {
                Some(_) if value.is_null() => PatchOperation::Remove(RemoveOperation { path }),
                Some(_) => PatchOperation::Replace(ReplaceOperation { path, value }),
                None => PatchOperation::Add(AddOperation { path, value }),
            })
        })
        .collect();
    json_patch::Patch(ops)
}
