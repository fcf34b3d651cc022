//! Finding the self-attention blocks of exported encoders: from each `Softmax` up to the three
//! projections of one input and down to the heads merged back, as `torch.onnx.export` writes
//! BERT, DistilBERT, RoBERTa and ViT layers (separate or packed Q/K/V projections, the scale on
//! the scores or on Q, Casts anywhere in between, a padding mask added as `(1 − mask) × c`).

use super::graph_view::GraphView;
use crate::onnx::attributes::{int_attr, ints_attr};
use crate::onnx::pb::NodeProto;
use std::collections::HashSet;

/// One self-attention block, as the fused operator needs it.
#[derive(Clone, Debug)]
pub(super) struct AttentionBlock {
    /// The tensor the three projections read (`[batch, seq, hidden_in]`).
    pub input: String,
    /// The Q, K and V projections, in that order.
    pub projections: [Projection; 3],
    /// Attention heads.
    pub heads: i64,
    /// Each head's width.
    pub head_size: i64,
    /// The factor the scores `Q·Kᵀ` are multiplied by before the softmax.
    pub scale: f32,
    /// The padding mask, where the block adds one.
    pub mask: Option<PaddingMask>,
    /// The block's result (`[batch, seq, heads × head_size]`): the merged heads' tensor.
    pub output: String,
    /// The index of the node that makes [`Self::output`] (the fused node takes its place).
    pub output_node: usize,
}

/// One projection: columns `columns` of the weight `weight` (`[hidden_in, n]`) and the same
/// entries of the bias `bias`.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Projection {
    /// The weight initializer.
    pub weight: String,
    /// The bias initializer.
    pub bias: String,
    /// The first column and the number of columns taken.
    pub columns: (usize, usize),
}

/// A padding mask the scores get as `(1 − mask) × filter`, `mask` a `[batch, seq]` tensor of ones
/// (tokens) and zeros (padding).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct PaddingMask {
    /// The `[batch, seq]` mask tensor.
    pub raw: String,
    /// What padded positions get added to their scores.
    pub filter: f32,
}

/// What the search found at one `Softmax`.
pub(super) enum Found {
    /// Not an attention softmax (nothing like Q·Kᵀ before it or ·V after it).
    Nothing,
    /// Attention, but not in a form the fused operator computes the same: why.
    LeftAlone(String),
    /// A block the fused operator computes.
    Block(Box<AttentionBlock>),
}

/// The attention block around the `Softmax` node `softmax`, if there is one.
pub(super) fn find_block(view: &GraphView, softmax: usize) -> Found {
    let node = &view.graph.node[softmax];
    if !matches!(int_attr(node, "axis"), Some(-1) | Some(3)) {
        return Found::Nothing;
    }
    let mut nodes = HashSet::from([softmax]);
    let Some(pv) = down_to_context(view, &node.output[0], &mut nodes) else {
        return Found::Nothing;
    };
    let Some(qk) = up_to_scores(view, &node.input[0], &mut nodes) else {
        let why = "between Q·Kᵀ and the softmax lies more than constant scales and one mask";
        return Found::LeftAlone(why.into());
    };
    match assemble(view, qk, pv, &mut nodes) {
        Ok(block) => Found::Block(Box::new(block)),
        Err(why) => Found::LeftAlone(why),
    }
}

/// What lies between Q·Kᵀ and the softmax.
struct Scores {
    /// The Q·Kᵀ `MatMul`.
    matmul: usize,
    /// Scale factors met on the way.
    scale: f32,
    /// The other input of the `Add` that adds a mask, where there is one.
    mask_term: Option<String>,
}

/// The heads merged back after `softmax · V`.
struct Context {
    /// The `softmax · V` MatMul.
    matmul: usize,
    /// The `Reshape` that merges the heads.
    merge: usize,
}

/// Follows Casts up from `tensor`.
fn through_casts_up<'g>(
    view: &GraphView<'g>,
    tensor: &'g str,
    nodes: &mut HashSet<usize>,
) -> &'g str {
    let mut t = tensor;
    while let Some((i, cast)) = view.made_by(t, "Cast") {
        nodes.insert(i);
        t = &cast.input[0];
    }
    t
}

/// The one reader of `tensor` that takes more than its shape (exports read the merged heads'
/// shape with `Shape` to build the Reshape's target), following Casts that are themselves
/// such a reader.
fn through_casts_down<'g>(
    view: &GraphView<'g>,
    tensor: &'g str,
    nodes: &mut HashSet<usize>,
) -> Option<(usize, &'g NodeProto)> {
    let mut t = tensor;
    loop {
        let mut readers = view
            .readers(t)
            .iter()
            .filter(|&&r| view.graph.node[r].op_type != "Shape");
        let (Some(reader), None) = (readers.next(), readers.next()) else {
            return None;
        };
        let node = &view.graph.node[*reader];
        if node.op_type != "Cast" {
            return Some((*reader, node));
        }
        nodes.insert(*reader);
        t = &node.output[0];
    }
}

/// A `Mul` or `Div` of `tensor` by a constant scalar: the other input and the factor it applies.
fn scaled_by(view: &GraphView, node: &NodeProto) -> Option<(usize, f32)> {
    let [a, b] = node.input.as_slice() else {
        return None;
    };
    match node.op_type.as_str() {
        "Div" => view.scalar(b).filter(|&c| c != 0.0).map(|c| (0, 1.0 / c)),
        "Mul" => match (view.scalar(a), view.scalar(b)) {
            (None, Some(c)) => Some((0, c)),
            (Some(c), None) => Some((1, c)),
            _ => None,
        },
        _ => None,
    }
}

/// Up from the softmax's input through Casts, constant scales and one `Add` (the mask) to the
/// Q·Kᵀ `MatMul`.
fn up_to_scores(view: &GraphView, input: &str, nodes: &mut HashSet<usize>) -> Option<Scores> {
    let mut t = through_casts_up(view, input, nodes);
    let mut scale = 1.0;
    let mut mask_term = None;
    for _ in 0..8 {
        let (i, node) = view.producer(t)?;
        match node.op_type.as_str() {
            "MatMul" => {
                nodes.insert(i);
                return Some(Scores {
                    matmul: i,
                    scale,
                    mask_term,
                });
            }
            "Add" if mask_term.is_none() && node.input.len() == 2 => {
                let side = (0..2).find(|&k| leads_to_matmul(view, &node.input[k]))?;
                nodes.insert(i);
                mask_term = Some(node.input[1 - side].clone());
                t = &node.input[side];
            }
            "Mul" | "Div" => {
                let (k, c) = scaled_by(view, node)?;
                nodes.insert(i);
                scale *= c;
                t = &node.input[k];
            }
            _ => return None,
        }
        t = through_casts_up(view, t, nodes);
    }
    None
}

/// Whether `tensor` comes from a `MatMul` through Casts and constant scales only.
fn leads_to_matmul(view: &GraphView, tensor: &str) -> bool {
    let mut t = tensor;
    for _ in 0..6 {
        let Some((_, node)) = view.producer(t) else {
            return false;
        };
        match node.op_type.as_str() {
            "MatMul" => return true,
            "Cast" => t = &node.input[0],
            "Mul" | "Div" => match scaled_by(view, node) {
                Some((k, _)) => t = &node.input[k],
                None => return false,
            },
            _ => return false,
        }
    }
    false
}

/// Down from the softmax's output to `· V` and the heads merged back
/// (`Transpose(0, 2, 1, 3)` then a 3-D `Reshape`).
fn down_to_context(view: &GraphView, output: &str, nodes: &mut HashSet<usize>) -> Option<Context> {
    let (pv, matmul) = through_casts_down(view, output, nodes)?;
    if matmul.op_type != "MatMul" || view.pinned(output) {
        return None;
    }
    nodes.insert(pv);
    let (ti, transpose) = through_casts_down(view, &matmul.output[0], nodes)?;
    if transpose.op_type != "Transpose" || ints_attr(transpose, "perm") != Some(&[0, 2, 1, 3]) {
        return None;
    }
    nodes.insert(ti);
    let (ri, merge) = through_casts_down(view, &transpose.output[0], nodes)?;
    if merge.op_type != "Reshape" {
        return None;
    }
    nodes.insert(ri);
    Some(Context {
        matmul: pv,
        merge: ri,
    })
}

/// The split heads of one projection: up through Casts and constant scales to
/// `Transpose(perm)` ← `Reshape([_, _, heads, head_size])` ← the projection.
struct Heads<'g> {
    /// The projection's output (`[batch, seq, heads × head_size]`).
    projected: &'g str,
    heads: i64,
    /// The head size where the Reshape names it.
    head_size: Option<i64>,
    /// Scale factors met on the way.
    scale: f32,
}

/// The heads behind `tensor`, whose last transposes together are `perm` (K's may be written as
/// one `Transpose(0, 2, 3, 1)` or as `Transpose(0, 2, 1, 3)` then `Transpose(0, 1, 3, 2)`).
fn heads_of<'g>(
    view: &GraphView<'g>,
    tensor: &'g str,
    key: bool,
    nodes: &mut HashSet<usize>,
) -> Option<Heads<'g>> {
    let mut t = tensor;
    let mut scale = 1.0;
    let mut wanted: &[i64] = if key { &[0, 2, 3, 1] } else { &[0, 2, 1, 3] };
    loop {
        t = through_casts_up(view, t, nodes);
        let (i, node) = view.producer(t)?;
        match node.op_type.as_str() {
            "Mul" | "Div" => {
                let (k, c) = scaled_by(view, node)?;
                scale *= c;
                t = &node.input[k];
            }
            "Transpose"
                if key
                    && wanted == [0, 2, 3, 1]
                    && ints_attr(node, "perm") == Some(&[0, 1, 3, 2]) =>
            {
                wanted = &[0, 2, 1, 3];
                t = &node.input[0];
            }
            "Transpose" if ints_attr(node, "perm") == Some(wanted) => {
                nodes.insert(i);
                t = through_casts_up(view, &node.input[0], nodes);
                break;
            }
            _ => return None,
        }
        nodes.insert(i);
    }
    let (ri, reshape) = view.made_by(t, "Reshape")?;
    let shape = view.shape_values(reshape.input.get(1)?)?;
    // The head size is often computed at run time (hidden / heads); the projection's width
    // gives it then.
    let [_, _, Some(heads), head_size] = shape.as_slice() else {
        return None;
    };
    if *heads <= 0 || head_size.is_some_and(|d| d <= 0) {
        return None;
    }
    nodes.insert(ri);
    Some(Heads {
        projected: &reshape.input[0],
        heads: *heads,
        head_size: *head_size,
        scale,
    })
}

/// The input, weight and bias behind one projection's output: `Add(MatMul(x, W), b)`, or one
/// output of a `Split` of such a projection along its last axis.
fn projection_of(
    view: &GraphView,
    projected: &str,
    nodes: &mut HashSet<usize>,
) -> Option<(String, Projection)> {
    let split = view.made_by(projected, "Split");
    let source = split.map_or(projected, |(_, s)| s.input[0].as_str());
    let (ai, add) = view.made_by(source, "Add")?;
    let (mm_side, bias) = (0..2).find_map(|k| {
        let b = view.initializer(&add.input[1 - k])?;
        (b.dims.len() == 1).then_some((k, b))
    })?;
    let (mi, matmul) = view.made_by(&add.input[mm_side], "MatMul")?;
    let weight = view.initializer(&matmul.input[1])?;
    let [_, width] = weight.dims.as_slice() else {
        return None;
    };
    if bias.dims != [*width] {
        return None;
    }
    let columns = match split {
        Some((si, split)) => {
            nodes.insert(si);
            split_columns(view, split, projected, *width)?
        }
        None => (0, usize::try_from(*width).ok()?),
    };
    nodes.extend([ai, mi]);
    let projection = Projection {
        weight: weight.name.clone(),
        bias: bias.name.clone(),
        columns,
    };
    Some((matmul.input[0].clone(), projection))
}

/// The columns (first, count) that a `Split` of a `width`-wide last axis gives its output
/// `output`: sizes from its second input, its `split` attribute, or equal parts.
fn split_columns(
    view: &GraphView,
    split: &NodeProto,
    output: &str,
    width: i64,
) -> Option<(usize, usize)> {
    let axis = int_attr(split, "axis").unwrap_or(0);
    if axis != -1 && axis != 2 {
        return None;
    }
    let parts = split.output.len() as i64;
    let sizes: Vec<i64> = match split.input.get(1).filter(|s| !s.is_empty()) {
        Some(sizes) => view.ints(sizes)?,
        None => match ints_attr(split, "split") {
            Some(sizes) => sizes.to_vec(),
            None if width % parts == 0 => vec![width / parts; parts as usize],
            None => return None,
        },
    };
    let fits = sizes.len() == split.output.len() && sizes.iter().all(|&s| (0..=width).contains(&s));
    if !fits || sizes.iter().sum::<i64>() != width {
        return None;
    }
    let k = split.output.iter().position(|o| o == output)?;
    let start: i64 = sizes[..k].iter().sum();
    Some((
        usize::try_from(start).ok()?,
        usize::try_from(*sizes.get(k)?).ok()?,
    ))
}

/// The block from its parts, or why the fused operator would not compute the same.
fn assemble(
    view: &GraphView,
    qk: Scores,
    pv: Context,
    nodes: &mut HashSet<usize>,
) -> Result<AttentionBlock, String> {
    let at = |i: usize| &view.graph.node[i];
    let not_heads = || "its Q, K or V is not a projection split into heads".to_string();
    let q = heads_of(view, &at(qk.matmul).input[0], false, nodes).ok_or_else(not_heads)?;
    let k = heads_of(view, &at(qk.matmul).input[1], true, nodes).ok_or_else(not_heads)?;
    let v = heads_of(view, &at(pv.matmul).input[1], false, nodes).ok_or_else(not_heads)?;
    if v.scale != 1.0 {
        return Err("V is scaled".into());
    }
    if [k.heads, v.heads] != [q.heads; 2] {
        return Err("Q, K and V split into different heads".into());
    }
    let mut projections = Vec::new();
    let mut inputs = HashSet::new();
    for h in [&q, &k, &v] {
        let (input, p) = projection_of(view, h.projected, nodes).ok_or_else(not_heads)?;
        inputs.insert(input);
        projections.push(p);
    }
    let width = projections[0].columns.1 as i64;
    let head_size = width / q.heads;
    let sizes_agree = [&q, &k, &v]
        .iter()
        .all(|h| h.head_size.is_none_or(|d| d == head_size));
    if projections.iter().any(|p| p.columns.1 as i64 != width)
        || width % q.heads != 0
        || !sizes_agree
    {
        return Err("its projections are not heads × head size wide".into());
    }
    if inputs.len() != 1 {
        return Err("Q, K and V read different inputs (cross-attention)".into());
    }
    let merge = at(pv.merge);
    let merged = view.shape_values(merge.input.get(1).map_or("", String::as_str));
    if !matches!(merged.as_deref(), Some([_, _, w]) if w.is_none_or(|w| w == width || w == -1)) {
        return Err("the heads are not merged back into [batch, seq, hidden]".into());
    }
    let mask = match &qk.mask_term {
        Some(term) => Some(
            padding_mask(view, term)
                .ok_or("its mask is not (1 − mask) × c on a [batch, seq] mask")?,
        ),
        None => None,
    };
    let inner: HashSet<usize> = nodes.iter().copied().filter(|&i| i != pv.merge).collect();
    for &i in &inner {
        if at(i)
            .output
            .iter()
            .any(|o| !view.read_only_within(o, nodes) && !shape_only(view, o, nodes))
        {
            return Err(format!("'{}' inside it is read elsewhere", at(i).output[0]));
        }
    }
    Ok(AttentionBlock {
        input: inputs.into_iter().next().unwrap_or_default(),
        projections: projections.try_into().map_err(|_| not_heads())?,
        heads: q.heads,
        head_size,
        scale: qk.scale * q.scale * k.scale,
        mask,
        output: merge.output[0].clone(),
        output_node: pv.merge,
    })
}

/// Whether every reader of `tensor` outside `nodes` only takes its shape (`Shape`), as exports
/// read a projection's batch and sequence sizes to build the Reshape targets.
fn shape_only(view: &GraphView, tensor: &str, nodes: &HashSet<usize>) -> bool {
    !view.pinned(tensor)
        && view
            .readers(tensor)
            .iter()
            .all(|&r| nodes.contains(&r) || view.graph.node[r].op_type == "Shape")
}

/// The padding mask behind the additive term `term`: `(1 − Cast(Unsqueeze(mask))) × c` in any
/// order of the Casts and Unsqueezes, `mask` a `[batch, seq]` tensor, `c` a constant.
fn padding_mask(view: &GraphView, term: &str) -> Option<PaddingMask> {
    let mut ignore = HashSet::new();
    let t = through_casts_up(view, term, &mut ignore);
    let (_, mul) = view.made_by(t, "Mul")?;
    let (k, filter) = scaled_by(view, mul)?;
    let t = through_casts_up(view, &mul.input[k], &mut ignore);
    let (_, sub) = view.made_by(t, "Sub")?;
    if view.scalar(&sub.input[0]) != Some(1.0) {
        return None;
    }
    // Walked up, the Unsqueezes come last first; the mask's axes are replayed forwards.
    let mut t = sub.input[1].as_str();
    let mut unsqueezes: Vec<Vec<i64>> = Vec::new();
    while let Some((_, node)) = view.producer(t) {
        match node.op_type.as_str() {
            "Cast" => {}
            "Unsqueeze" => unsqueezes.push(match node.input.get(1) {
                Some(a) => view.ints(a)?,
                None => ints_attr(node, "axes")?.to_vec(),
            }),
            _ => break,
        }
        t = &node.input[0];
    }
    let is_input = view.graph.input.iter().any(|i| i.name == t);
    let unsqueezed = unsqueezes
        .iter()
        .rev()
        .try_fold(vec![true, true], |dims, axes| unsqueeze(dims, axes))?;
    (is_input && unsqueezed == [true, false, false, true]).then(|| PaddingMask {
        raw: t.to_string(),
        filter,
    })
}

/// `dims` (true for the mask's own axes, false for inserted ones) with ones inserted at
/// `axes`, as `Unsqueeze` does; `None` for axes out of range.
fn unsqueeze(dims: Vec<bool>, axes: &[i64]) -> Option<Vec<bool>> {
    let rank = (dims.len() + axes.len()) as i64;
    let mut at: Vec<i64> = axes
        .iter()
        .map(|&a| if a < 0 { a + rank } else { a })
        .collect();
    at.sort_unstable();
    if at.iter().any(|&a| !(0..rank).contains(&a)) {
        return None;
    }
    let mut own = dims.into_iter();
    (0..rank)
        .map(|i| {
            if at.contains(&i) {
                Some(false)
            } else {
                own.next()
            }
        })
        .collect()
}
