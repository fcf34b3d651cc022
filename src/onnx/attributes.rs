//! Reading a node's attributes by name (the passes, the INT8 plan, the MAC count and bias
//! correction all read them).

use super::pb::{AttributeProto, NodeProto};

/// The attribute `name` of `node`.
pub fn attribute<'a>(node: &'a NodeProto, name: &str) -> Option<&'a AttributeProto> {
    node.attribute.iter().find(|a| a.name == name)
}

/// An integer attribute.
pub(crate) fn int_attr(node: &NodeProto, name: &str) -> Option<i64> {
    attribute(node, name).map(|a| a.i)
}

/// A float attribute.
pub(crate) fn float_attr(node: &NodeProto, name: &str) -> Option<f32> {
    attribute(node, name).map(|a| a.f)
}

/// An integer-list attribute.
pub(crate) fn ints_attr<'a>(node: &'a NodeProto, name: &str) -> Option<&'a [i64]> {
    attribute(node, name).map(|a| a.ints.as_slice())
}

/// A string attribute (lossy UTF-8).
pub(crate) fn string_attr(node: &NodeProto, name: &str) -> Option<String> {
    attribute(node, name).map(|a| String::from_utf8_lossy(&a.s).into_owned())
}
