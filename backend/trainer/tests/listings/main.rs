//! The chapters' Python listings, read as the code a learner would copy and run: every
//! `parallelize_module` plan must name modules of the trainer's own model (the model the
//! chapters teach; its module names come from its named parameters, not from a list here),
//! and every state-dict call must be made as PyTorch documents it. A listing that shards a
//! module the model lacks raises, or shards another model; one that loads an optimizer's own
//! `state_dict()` in place restores nothing and says nothing.

mod api;
mod plans;
mod python;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use scalebook_shared::config::{ConfigFile, TrainConfig};

use crate::api::{DCP_LOAD, PARALLELIZE_MODULE, Signature, holds_optimizer_state_dict, signatures};
use crate::plans::{Binding, Model, check_plan};
use crate::python::{Call, Statement, assignment, calls, imports, listings, loop_over, statements};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn shipped(name: &str) -> TrainConfig {
    let text = std::fs::read_to_string(root().join("config/ViT.yaml")).unwrap();
    ConfigFile::parse(&text).unwrap().get(name).unwrap()
}

/// Every chapter's file name and text, in name order.
fn chapters() -> Vec<(String, String)> {
    let mut chapters: Vec<(String, String)> = std::fs::read_dir(root().join("static/chapters"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .map(|path| (path.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&path).unwrap()))
        .collect();
    chapters.sort();
    chapters
}

/// What the listings of one chapter were found to do, and how much was checked.
#[derive(Default)]
struct Findings {
    problems: Vec<String>,
    plan_keys: usize,
    state_dict_calls: usize,
}

/// What a chapter's listings have bound so far, read in order (a later listing of a chapter
/// goes on from the earlier ones, as the text does).
#[derive(Default)]
struct Scope {
    /// Imported names and the dotted paths they stand for.
    aliases: BTreeMap<String, String>,
    bindings: BTreeMap<String, Binding>,
    /// Names bound to something holding an optimizer's own `state_dict()`.
    tainted: Vec<String>,
}

impl Scope {
    /// `callee` with its first name replaced by what an import bound it to.
    fn resolve(&self, callee: &str) -> String {
        let end = callee.find(['.', '[']).unwrap_or(callee.len());
        match self.aliases.get(&callee[..end]) {
            Some(path) => format!("{path}{}", &callee[end..]),
            None => callee.to_owned(),
        }
    }
}

/// Everything the listings checker needs that does not change from chapter to chapter.
struct Checker {
    model: Model,
    signatures: Vec<Signature>,
    /// Names the chapters bind to a `torch.optim` optimizer.
    optimizers: Vec<String>,
}

impl Checker {
    fn new(model: Model, texts: &[&str]) -> Checker {
        let mut optimizers = Vec::new();
        for text in texts {
            let mut scope = Scope::default();
            for statement in listings(text).iter().flat_map(statements) {
                scope.aliases.extend(imports(&statement.text));
                if let Some((names, value)) = assignment(&statement.text)
                    && calls(value).first().is_some_and(|c| scope.resolve(&c.callee).starts_with("torch.optim."))
                {
                    optimizers.extend(names.into_iter().map(str::to_owned));
                }
            }
        }
        Checker { model, signatures: signatures(), optimizers }
    }

    fn check(&self, file: &str, markdown: &str) -> Findings {
        let mut findings = Findings::default();
        let mut scope = Scope::default();
        for statement in listings(markdown).iter().flat_map(statements) {
            self.bind(&statement, &mut scope);
            for call in calls(&statement.text) {
                for problem in self.check_call(&call, &scope, &mut findings) {
                    findings.problems.push(format!("{file}:{}: {problem}\n    {}", statement.line, statement.text));
                }
            }
        }
        findings
    }

    /// Records what `statement` binds: imports, loop names, aliases, and the names that now
    /// hold an optimizer's own state dict.
    fn bind(&self, statement: &Statement, scope: &mut Scope) {
        scope.aliases.extend(imports(&statement.text));
        if let Some((name, iterated)) = loop_over(&statement.text) {
            scope.bindings.insert(name.to_owned(), Binding::Each(iterated.to_owned()));
        }
        if let Some((names, value)) = assignment(&statement.text) {
            let holds = holds_optimizer_state_dict(value, &self.optimizers, &scope.tainted);
            scope.tainted.retain(|t| !names.contains(&t.as_str()));
            if holds {
                scope.tainted.extend(names.iter().map(|n| (*n).to_owned()));
            }
            if let [name] = names[..] {
                scope.bindings.insert(name.to_owned(), Binding::Alias(value.to_owned()));
            }
        }
    }

    fn check_call(&self, call: &Call, scope: &Scope, findings: &mut Findings) -> Vec<String> {
        let resolved = scope.resolve(&call.callee);
        let mut problems = Vec::new();
        for signature in self.signatures.iter().filter(|s| s.is_called_by(&call.callee, &resolved)) {
            findings.state_dict_calls += usize::from(signature.name != PARALLELIZE_MODULE);
            problems.extend(signature.problems(call));
        }
        if resolved == PARALLELIZE_MODULE {
            let (plan_problems, keys) = check_plan(call, &scope.bindings, &self.model);
            problems.extend(plan_problems);
            findings.plan_keys += keys;
        }
        let loaded = call.argument(0, "state_dict").unwrap_or_default();
        if resolved == DCP_LOAD && holds_optimizer_state_dict(loaded, &self.optimizers, &scope.tainted) {
            problems.push(
                "dcp.load fills an optimizer's own state_dict() in place, but a fresh optimizer has no Adam state in it to fill, \
                 so none is restored: take the state with get_state_dict and put it back with set_state_dict"
                    .to_owned(),
            );
        }
        problems
    }
}

#[test]
fn every_listing_shards_the_models_own_modules_and_calls_pytorch_as_documented() {
    let chapters = chapters();
    let texts: Vec<&str> = chapters.iter().map(|(_, text)| text.as_str()).collect();
    let checker = Checker::new(Model::of(&shipped("base")), &texts);
    let mut all = Findings::default();
    for (file, text) in &chapters {
        let findings = checker.check(file, text);
        all.problems.extend(findings.problems);
        all.plan_keys += findings.plan_keys;
        all.state_dict_calls += findings.state_dict_calls;
    }
    assert!(all.problems.is_empty(), "{} problem(s) in the chapters' listings:\n{}", all.problems.len(), all.problems.join("\n"));
    // The chapters do shard and checkpoint: a reader that found neither would pass by checking nothing.
    assert!(all.plan_keys >= 6 && all.state_dict_calls >= 6, "{} plan keys, {} state-dict calls", all.plan_keys, all.state_dict_calls);
    assert!(checker.optimizers.iter().any(|o| o == "optimizer"), "{:?}", checker.optimizers);
}

/// The problems the checker finds in `code`, as if it were a chapter's only listing.
fn problems_in(code: &str) -> Vec<String> {
    let markdown = format!("Text.\n\n```python\n{code}```\n");
    let checker = Checker::new(Model::of(&shipped("cpu_short")), &["```python\noptimizer = torch.optim.Adam(model.parameters())\n```\n"]);
    checker.check("test.md", &markdown).problems
}

#[test]
fn a_plan_key_the_model_lacks_is_named_and_wildcards_expand() {
    let code = "from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module\n\
                for block in model.blocks:\n    parallelize_module(block, mesh, {\"attn.qkv\": ColwiseParallel(), \"attn.q\": ColwiseParallel()})\n\
                parallelize_module(model.blocks[0], mesh, {\"norm1\": ColwiseParallel()})\n\
                parallelize_module(model, mesh, {\"blocks.*.mlp.fc?\": ColwiseParallel(), \"head\": ColwiseParallel()})\n";
    let problems = problems_in(code);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems[0].starts_with("test.md:6: plan key `attn.qkv` (`blocks.*.attn.qkv` in the model) names no module"),
        "{}",
        problems[0]
    );
    assert!(problems[1].starts_with("test.md:7: `blocks.0.norm1` gets ColwiseParallel()"), "{}", problems[1]);
}

#[test]
fn an_optimizers_own_state_dict_loaded_in_place_is_named() {
    let code = "import torch.distributed.checkpoint as dcp\n\
                state = {\"model\": model.state_dict(), \"optim\": optimizer.state_dict()}\n\
                dcp.load(state, checkpoint_id=\"checkpoints/epoch3\")\n\
                model.load_state_dict(state[\"model\"])\noptimizer.load_state_dict(state[\"optim\"])\n";
    let problems = problems_in(code);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(problems[0].starts_with("test.md:6: dcp.load fills an optimizer's own state_dict() in place"), "{}", problems[0]);
}

#[test]
fn a_call_against_the_documented_signature_is_named() {
    let code = "from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict\n\
                m, o = get_state_dict(model, optimizer, StateDictOptions(full=True))\n\
                set_state_dict(model, optimizer, model_state_dict=m)\n";
    let problems = problems_in(code);
    let rules: Vec<&str> = problems.iter().map(|p| p.split_once(": ").unwrap().1.split('\n').next().unwrap()).collect();
    assert_eq!(
        rules,
        [
            "torch.distributed.checkpoint.state_dict.get_state_dict takes 2 positional argument(s), the listing gives 3",
            "torch.distributed.checkpoint.state_dict.StateDictOptions has no parameter `full`",
            "torch.distributed.checkpoint.state_dict.set_state_dict needs `optim_state_dict`, which the listing leaves out",
        ]
    );
}
