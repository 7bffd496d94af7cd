//! PyTorch's documented signatures of the calls the chapters make to save, load and shard, and
//! the check of a call against them: too many positional arguments, a keyword the function
//! does not take, or a required one left out is a listing that raises when a learner runs it.
//! And the one misuse that raises nothing: an optimizer's own `state_dict()` loaded in place.

use crate::python::{Call, calls, names};

/// The signatures as PyTorch documents them (parameters after `*` are keyword-only; those
/// without a default are required). A leading `.` is a method of any object.
const SIGNATURES: &[&str] = &[
    "torch.distributed.checkpoint.state_dict.get_state_dict(model, optimizers, *, submodules=None, options=None)",
    "torch.distributed.checkpoint.state_dict.set_state_dict(model, optimizers, *, model_state_dict, optim_state_dict, options=None)",
    "torch.distributed.checkpoint.state_dict.get_model_state_dict(model, *, submodules=None, options=None)",
    "torch.distributed.checkpoint.state_dict.set_model_state_dict(model, model_state_dict, *, options=None)",
    "torch.distributed.checkpoint.state_dict.get_optimizer_state_dict(model, optimizers, *, submodules=None, options=None)",
    "torch.distributed.checkpoint.state_dict.set_optimizer_state_dict(model, optimizers, optim_state_dict, *, options=None)",
    "torch.distributed.checkpoint.state_dict.StateDictOptions(full_state_dict=False, cpu_offload=False, ignore_frozen_params=False, \
     keep_submodule_prefixes=True, strict=True, broadcast_from_rank0=False, flatten_optimizer_state_dict=False)",
    "torch.distributed.checkpoint.save(state_dict, *, checkpoint_id=None, storage_writer=None, planner=None, process_group=None, no_dist=False)",
    "torch.distributed.checkpoint.load(state_dict, *, checkpoint_id=None, storage_reader=None, planner=None, process_group=None, no_dist=False)",
    "torch.distributed.tensor.parallel.parallelize_module(module, device_mesh=None, parallelize_plan=None, *, src_data_rank=0)",
    ".state_dict(*, destination=None, prefix='', keep_vars=False)",
    ".load_state_dict(state_dict, strict=True, assign=False)",
];

/// `torch.distributed.checkpoint.load`, which fills the dict it is given in place.
pub const DCP_LOAD: &str = "torch.distributed.checkpoint.load";
pub const PARALLELIZE_MODULE: &str = "torch.distributed.tensor.parallel.parallelize_module";

struct Param {
    name: String,
    keyword_only: bool,
    required: bool,
}

/// A documented function: its dotted name (or `.method`) and its parameters in order.
pub struct Signature {
    pub name: String,
    params: Vec<Param>,
}

/// Every signature of [`SIGNATURES`], read with the listings' own reader.
pub fn signatures() -> Vec<Signature> {
    SIGNATURES
        .iter()
        .map(|text| {
            let call = calls(text).into_iter().next().unwrap_or_else(|| panic!("`{text}` is not a signature"));
            let mut keyword_only = false;
            let mut params = Vec::new();
            for arg in &call.args {
                match (arg.keyword.as_deref(), arg.value.as_str()) {
                    (None, "*") => keyword_only = true,
                    (None, name) => params.push(Param { name: name.to_owned(), keyword_only, required: true }),
                    (Some(name), _) => params.push(Param { name: name.to_owned(), keyword_only, required: false }),
                }
            }
            let dotted = text.split('(').next().unwrap_or_default();
            Signature { name: if dotted.starts_with('.') { dotted.to_owned() } else { call.callee }, params }
        })
        .collect()
}

impl Signature {
    /// Whether a call of `callee`, resolved through the listing's imports to `resolved`, calls
    /// this function: by its full name, by its bare name when no import says where it is from,
    /// or as a method on any object.
    pub fn is_called_by(&self, callee: &str, resolved: &str) -> bool {
        match self.name.strip_prefix('.') {
            Some(method) => callee.rsplit_once('.').is_some_and(|(_, last)| last == method) && !resolved.starts_with("torch."),
            None => resolved == self.name || (resolved == callee && !callee.contains('.') && self.name.ends_with(&format!(".{callee}"))),
        }
    }

    /// What is wrong with `call` against this signature.
    pub fn problems(&self, call: &Call) -> Vec<String> {
        let name = &self.name;
        if call.args.iter().any(|a| a.keyword.is_none() && a.value.starts_with('*')) {
            return Vec::new();
        }
        let positional = call.positional().count();
        let takes = self.params.iter().take_while(|p| !p.keyword_only).count();
        let mut problems = Vec::new();
        if positional > takes {
            problems.push(format!("{name} takes {takes} positional argument(s), the listing gives {positional}"));
        }
        for keyword in call.args.iter().filter_map(|a| a.keyword.as_deref()) {
            if !self.params.iter().any(|p| p.name == keyword) {
                problems.push(format!("{name} has no parameter `{keyword}`"));
            }
        }
        for (i, param) in self.params.iter().enumerate().filter(|(_, p)| p.required) {
            let by_position = !param.keyword_only && i < positional;
            if !by_position && !call.args.iter().any(|a| a.keyword.as_deref() == Some(param.name.as_str())) {
                problems.push(format!("{name} needs `{}`, which the listing leaves out", param.name));
            }
        }
        problems
    }
}

/// Whether `expr` holds an optimizer's own `state_dict()`: calls it on one of `optimizers`, or
/// mentions a name `tainted` says was bound to one.
pub fn holds_optimizer_state_dict(expr: &str, optimizers: &[String], tainted: &[String]) -> bool {
    let calls_it = calls(expr)
        .iter()
        .any(|c| c.callee.rsplit_once('.').is_some_and(|(on, m)| m == "state_dict" && optimizers.iter().any(|o| o == on)));
    calls_it || names(expr).iter().any(|n| tainted.iter().any(|t| t == n))
}
