//! The trainer's own model as a tree of modules, read from its named parameters, and the check
//! of a `parallelize_module` plan against it: every key must name modules the model has (a
//! key for a module it lacks raises in PyTorch, or belongs to another model), and a column-
//! or row-wise style must land on a linear layer.

use std::collections::BTreeMap;

use scalebook_shared::config::TrainConfig;
use scalebook_trainer::model::{VisionTransformer, VitSpec};
use tch::{Device, nn};

use crate::python::{Call, dict_entries, string_literal};

/// Every module of the model by its PyTorch name (`""` is the model itself), with the shapes of
/// the parameters it holds directly.
pub struct Model {
    modules: BTreeMap<String, BTreeMap<String, Vec<i64>>>,
}

impl Model {
    /// The modules of the model `config` builds, from its named parameters.
    pub fn of(config: &TrainConfig) -> Model {
        let vs = nn::VarStore::new(Device::Cpu);
        let _model = VisionTransformer::new(&vs.root(), &VitSpec::from(config));
        let mut modules: BTreeMap<String, BTreeMap<String, Vec<i64>>> = BTreeMap::new();
        modules.insert(String::new(), BTreeMap::new());
        for (name, tensor) in vs.variables() {
            let (owner, param) = name.rsplit_once('.').unwrap_or(("", &name));
            let atoms: Vec<&str> = owner.split('.').filter(|a| !a.is_empty()).collect();
            for depth in 1..=atoms.len() {
                modules.entry(atoms[..depth].join(".")).or_default();
            }
            modules.entry(owner.to_owned()).or_default().insert(param.to_owned(), tensor.size());
        }
        Model { modules }
    }

    /// The modules `pattern` names, each dot-separated part matched as `fnmatch` matches it, as
    /// `parallelize_module` expands a key.
    pub fn matching(&self, pattern: &str) -> Vec<&str> {
        let parts: Vec<&str> = pattern.split('.').filter(|p| !p.is_empty()).collect();
        self.modules
            .keys()
            .filter(|name| {
                let atoms: Vec<&str> = name.split('.').filter(|a| !a.is_empty()).collect();
                atoms.len() == parts.len() && atoms.iter().zip(&parts).all(|(a, p)| glob(p.as_bytes(), a.as_bytes()))
            })
            .map(String::as_str)
            .collect()
    }

    /// Whether `module` is a linear layer: it holds a two-dimensional `weight` of its own.
    fn is_linear(&self, module: &str) -> bool {
        self.modules.get(module).and_then(|params| params.get("weight")).is_some_and(|shape| shape.len() == 2)
    }
}

/// `fnmatch` of one name part: `*` any run, `?` any one character.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    match (pattern.first(), text.first()) {
        (None, None) => true,
        (Some(b'*'), _) => glob(&pattern[1..], text) || (!text.is_empty() && glob(pattern, &text[1..])),
        (Some(b'?'), Some(_)) => glob(&pattern[1..], &text[1..]),
        (Some(p), Some(t)) if p == t => glob(&pattern[1..], &text[1..]),
        _ => false,
    }
}

/// What a name in a listing stands for, as far as modules go.
pub enum Binding {
    /// `name = EXPR`.
    Alias(String),
    /// `for name in EXPR:`, each child of the module EXPR names in turn.
    Each(String),
}

/// The model's name in the listings: the chapters call the tutorial's model `model`.
const MODEL: &str = "model";

/// The module pattern `expr` names (`model.blocks[0]` is `blocks.0`; a loop's name over
/// `model.blocks` is `blocks.*`), or `None` when it is not one of the model's modules.
pub fn module_pattern(expr: &str, bindings: &BTreeMap<String, Binding>) -> Option<String> {
    let expr = expr.trim();
    let (head, rest) = expr.split_once('.').unwrap_or((expr, ""));
    let (head, subscript) = head.split_once('[').unwrap_or((head, ""));
    let base = match (head, bindings.get(head)) {
        (MODEL, _) => String::new(),
        (_, Some(Binding::Alias(aliased))) => module_pattern(aliased, bindings)?,
        (_, Some(Binding::Each(iterated))) => join(&module_pattern(iterated, bindings)?, "*"),
        _ => return None,
    };
    let mut path = base;
    let rest = if subscript.is_empty() { rest.to_owned() } else { format!("[{subscript}.{rest}") };
    for part in rest.split('.').filter(|p| !p.is_empty()) {
        let (name, index) = part.split_once('[').map_or((part, None), |(n, i)| (n, Some(i)));
        path = join(&path, name);
        if let Some(index) = index {
            let index = index.strip_suffix(']')?;
            index.parse::<usize>().ok()?;
            path = join(&path, index);
        }
    }
    Some(path)
}

fn join(prefix: &str, name: &str) -> String {
    match (prefix.is_empty(), name.is_empty()) {
        (true, _) => name.to_owned(),
        (_, true) => prefix.to_owned(),
        _ => format!("{prefix}.{name}"),
    }
}

/// The problems of one `parallelize_module` call, and how many plan keys it checked.
pub fn check_plan(call: &Call, bindings: &BTreeMap<String, Binding>, model: &Model) -> (Vec<String>, usize) {
    let module = call.argument(0, "module").unwrap_or_default();
    let Some(prefix) = module_pattern(module, bindings) else {
        return (vec![format!("cannot tell which of the model's modules `{module}` is")], 0);
    };
    let plan = call.argument(2, "parallelize_plan").unwrap_or_default();
    let entries: Vec<(String, &str)> = match dict_entries(plan) {
        Some(entries) => entries.into_iter().map(|(key, style)| (string_literal(key).unwrap_or(key).to_owned(), style)).collect(),
        None if plan.trim_start().starts_with('{') => return (vec![format!("cannot read the plan `{plan}`")], 0),
        None => vec![(String::new(), plan)],
    };
    let mut problems = Vec::new();
    for (key, style) in &entries {
        let pattern = join(&prefix, key);
        let matched = model.matching(&pattern);
        if matched.is_empty() {
            problems.push(format!("plan key `{key}` (`{pattern}` in the model) names no module of the trainer's model"));
        }
        let sharded = ["ColwiseParallel", "RowwiseParallel"].iter().any(|s| style.trim_start().starts_with(s));
        if let Some(other) = matched.iter().find(|m| sharded && !model.is_linear(m)) {
            problems.push(format!("`{other}` gets {style}, which shards linear layers, but it is not one"));
        }
    }
    (problems, entries.len())
}
