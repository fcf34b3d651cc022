//! tract's analysis errors in words: `Failed analyse for node #12 "name" Unimplemented(Loop):
//! DETAIL` becomes which node, of which op, tract does not run, and why in tract's own terms.

/// The clause that says why tract cannot analyse a model, from its error `text`: the node and
/// op it does not implement where the text says so, the text itself otherwise.
pub(super) fn analysis_refusal(text: &str) -> String {
    let unimplemented = text.split_once("Unimplemented(").and_then(|(head, tail)| {
        let (op, detail) = tail.split_once(')')?;
        let node = head.rsplit_once(" \"")?.1.split('"').next()?;
        let detail = detail.trim_start_matches(':').trim();
        Some((node, op, detail))
    });
    match unimplemented {
        Some((node, op, detail)) if !detail.is_empty() => format!(
            "tract does not run node '{node}' ({op}) as this model uses it ({})",
            detail.trim_end_matches('.')
        ),
        Some((node, op, _)) => format!("tract does not run node '{node}' ({op})"),
        None => format!("tract cannot analyse the model: {text}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unimplemented_op_is_named_with_its_node() {
        assert_eq!(
            analysis_refusal(
                "Failed analyse for node #1246 \"p2o.Loop.0\" Unimplemented(Loop): Wrong number \
                 of outputs. Op says 1, node says 23."
            ),
            "tract does not run node 'p2o.Loop.0' (Loop) as this model uses it (Wrong number of \
             outputs. Op says 1, node says 23)"
        );
        assert_eq!(
            analysis_refusal("Impossible to unify"),
            "tract cannot analyse the model: Impossible to unify"
        );
    }
}
