//! The public API of the `runcore` crate as a reviewed listing (issue 8, item 6): every item a
//! user can name, at the path they name it by, with its kind, generics, public fields, enum
//! variants, the signatures of its public functions and methods, and the traits it implements.
//! The listing is snapshotted as `snapshots/public_api__public_api.snap`, so any change to the
//! public surface — a new method, a field made public, a derive dropped, a type moved — is a
//! visible diff to review, not an accident.
//!
//! It is read from the source with `syn`, on stable Rust (rustdoc's JSON output needs
//! nightly): starting at `src/lib.rs`, following `mod` declarations to their files, expanding
//! the crate's own item macros (`macro_rules!` as the crate uses them), and resolving `use`
//! re-exports. An item is public when it can be named from outside: declared `pub` in a chain
//! of `pub` modules, or re-exported by a `pub use` in one; `pub` items of private modules only
//! count through a re-export. Every Cargo feature is taken as on; what a feature gates is
//! marked with it. `#[cfg(test)]` code is left out.
//!
//! Two rules of the crate's API are asserted here as well, not just shown:
//! - one path per item: an item reachable at two public paths fails the test;
//! - re-exports by name: a `pub use …::*` fails the test.
//!
//! A derive is listed as the impl it makes (`impl Clone`), like a hand-written impl; thiserror's
//! `Error` also makes `Display` and the `From` of each `#[from]` field. Impls of a public trait
//! over a private type (the `From<…Repr>` of a serde wire representation) are left out, as are
//! auto traits (`Send`, `Sync`, …). Paths in signatures are shortened to their last segment.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use proc_macro2::{Delimiter, Group, Spacing, TokenStream, TokenTree};
use quote::ToTokens;
use syn::parse::discouraged::Speculative;
use syn::parse::{ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::visit_mut::VisitMut;
use syn::{Attribute, Fields, ImplItem, Item, Meta, TraitItem, UseTree, Visibility};

/// The crate's name in the listed paths.
const CRATE: &str = "runcore";

#[test]
fn public_api() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let krate = Crate::load(&root);
    let listing = krate.listing();
    common::snapshot!("public_api", listing);
}

// ----- the crate's modules, loaded from the source -----------------------------------------

type ModId = usize;

/// One module: its items after cfg filtering and macro expansion.
struct Module {
    name: String,
    parent: Option<ModId>,
    /// `pub` (and not `pub(crate)` or private) where it is declared, every feature on.
    public: bool,
    /// The features it needs to exist, its parents' included.
    gates: BTreeSet<String>,
    /// The features it needs to be `pub` besides those (a module declared `pub` under a
    /// feature and private without it).
    public_gates: BTreeSet<String>,
    items: Vec<Item>,
}

struct Crate {
    modules: Vec<Module>,
}

/// Whether a `#[cfg]` holds with every feature on, and which features it needs.
enum Cfg {
    Off,
    On(BTreeSet<String>),
}

impl Crate {
    fn load(src: &Path) -> Crate {
        let file = read_file(&src.join("lib.rs"));
        let mut krate = Crate {
            modules: vec![Module {
                name: CRATE.to_owned(),
                parent: None,
                public: true,
                gates: BTreeSet::new(),
                public_gates: BTreeSet::new(),
                items: Vec::new(),
            }],
        };
        // Modules first (macros here do not produce modules), then every macro definition,
        // then the items of every module with the macro invocations expanded.
        let mut raw = vec![Vec::new()];
        krate.load_items(0, file.items, src, &mut raw);
        let macros = MacroRules::collect(&raw);
        for (id, items) in raw.into_iter().enumerate() {
            krate.modules[id].items = expand_items(items, &macros, 0);
        }
        krate
    }

    /// Stores `items` as module `id`'s and loads the modules they declare (children of a
    /// module live in `dir`).
    fn load_items(&mut self, id: ModId, items: Vec<Item>, dir: &Path, raw: &mut Vec<Vec<Item>>) {
        // How each module is declared without any feature: (exists, public).
        let mut without_features: BTreeMap<String, (bool, bool)> = BTreeMap::new();
        for item in &items {
            if let Item::Mod(module) = item
                && cfg_holds_without_features(&module.attrs)
            {
                let entry = without_features
                    .entry(module.ident.to_string())
                    .or_default();
                entry.0 = true;
                entry.1 |= matches!(module.vis, Visibility::Public(_));
            }
        }
        let mut kept = Vec::new();
        for item in items {
            let Cfg::On(gates) = cfg(attrs_of(&item)) else {
                continue;
            };
            if let Item::Mod(module) = &item {
                assert!(
                    !module.attrs.iter().any(|a| a.path().is_ident("path")),
                    "#[path] on mod {} is not supported",
                    module.ident
                );
                let name = module.ident.to_string();
                let child_dir = dir.join(&name);
                let items = match &module.content {
                    Some((_, items)) => items.clone(),
                    None => {
                        let flat = dir.join(format!("{name}.rs"));
                        let nested = child_dir.join("mod.rs");
                        let path = if flat.exists() { flat } else { nested };
                        read_file(&path).items
                    }
                };
                let (exists, public) = without_features.get(&name).copied().unwrap_or_default();
                let mut module_gates = self.modules[id].gates.clone();
                if !exists {
                    module_gates.extend(gates.iter().cloned());
                }
                let public_gates = if exists && !public {
                    gates
                } else {
                    BTreeSet::new()
                };
                let child = self.modules.len();
                self.modules.push(Module {
                    name,
                    parent: Some(id),
                    public: matches!(module.vis, Visibility::Public(_)),
                    gates: module_gates,
                    public_gates,
                    items: Vec::new(),
                });
                raw.push(Vec::new());
                self.load_items(child, items, &child_dir, raw);
            }
            kept.push(item);
        }
        raw[id] = kept;
    }

    fn children(&self, id: ModId) -> impl Iterator<Item = ModId> + '_ {
        (0..self.modules.len()).filter(move |&m| self.modules[m].parent == Some(id))
    }

    fn child(&self, id: ModId, name: &str) -> Option<ModId> {
        self.children(id).find(|&m| self.modules[m].name == name)
    }

    fn path_of(&self, id: ModId) -> String {
        match self.modules[id].parent {
            None => self.modules[id].name.clone(),
            Some(parent) => format!("{}::{}", self.path_of(parent), self.modules[id].name),
        }
    }
}

fn read_file(path: &Path) -> syn::File {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    syn::parse_file(&text).unwrap_or_else(|e| panic!("cannot parse {}: {e}", path.display()))
}

// ----- cfg and attributes -------------------------------------------------------------------

fn attrs_of(item: &Item) -> &[Attribute] {
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// Evaluates every `#[cfg]` of `attrs` with all features on.
fn cfg(attrs: &[Attribute]) -> Cfg {
    match eval_cfgs(attrs, true) {
        Some(gates) => Cfg::On(gates),
        None => Cfg::Off,
    }
}

/// Whether every `#[cfg]` of `attrs` holds with no feature on.
fn cfg_holds_without_features(attrs: &[Attribute]) -> bool {
    eval_cfgs(attrs, false).is_some()
}

fn eval_cfgs(attrs: &[Attribute], features_on: bool) -> Option<BTreeSet<String>> {
    let mut gates = BTreeSet::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident("cfg")) {
        let predicate: Meta = attr.parse_args().expect("a cfg predicate");
        gates.extend(eval_cfg(&predicate, features_on)?);
    }
    Some(gates)
}

/// Whether `predicate` holds with every feature on (or none), and the features it needs.
fn eval_cfg(predicate: &Meta, features_on: bool) -> Option<BTreeSet<String>> {
    match predicate {
        Meta::Path(path) if path.is_ident("test") => None,
        Meta::NameValue(nv) if nv.path.is_ident("feature") => {
            let feature = nv.value.to_token_stream().to_string();
            features_on.then(|| BTreeSet::from([feature.trim_matches('"').to_owned()]))
        }
        Meta::List(list) if list.path.is_ident("not") => {
            let inner: Meta = list.parse_args().expect("one predicate in not(…)");
            match eval_cfg(&inner, features_on) {
                None => Some(BTreeSet::new()),
                Some(_) => None,
            }
        }
        Meta::List(list) if list.path.is_ident("all") => {
            let mut gates = BTreeSet::new();
            for inner in list
                .parse_args_with(Punctuated::<Meta, syn::Token![,]>::parse_terminated)
                .expect("predicates in all(…)")
            {
                gates.extend(eval_cfg(&inner, features_on)?);
            }
            Some(gates)
        }
        other => panic!(
            "teach tests/public_api.rs the cfg predicate `{}`",
            other.to_token_stream()
        ),
    }
}

/// The `#[cfg_attr(predicate, …)]` contents whose predicate holds, with their gates.
fn cfg_attr_metas(attrs: &[Attribute]) -> Vec<(Meta, BTreeSet<String>)> {
    let mut metas = Vec::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident("cfg_attr")) {
        let (predicate, inner) = attr
            .parse_args_with(|input: ParseStream| {
                let predicate: Meta = input.parse()?;
                input.parse::<syn::Token![,]>()?;
                let inner = Punctuated::<Meta, syn::Token![,]>::parse_terminated(input)?;
                Ok((predicate, inner))
            })
            .expect("cfg_attr(predicate, attributes)");
        if let Some(gates) = eval_cfg(&predicate, true) {
            metas.extend(inner.into_iter().map(|meta| (meta, gates.clone())));
        }
    }
    metas
}

/// The derives of an item, each with the features it needs: `(trait path, gates)`.
fn derives(attrs: &[Attribute]) -> Vec<(String, BTreeSet<String>)> {
    let mut found = Vec::new();
    let mut add = |meta: &Meta, gates: &BTreeSet<String>| {
        if let Meta::List(list) = meta
            && list.path.is_ident("derive")
        {
            let paths = list
                .parse_args_with(Punctuated::<syn::Path, syn::Token![,]>::parse_terminated)
                .expect("derive(paths)");
            for path in paths {
                found.push((tokens(&path), gates.clone()));
            }
        }
    };
    for attr in attrs {
        add(&attr.meta, &BTreeSet::new());
    }
    for (meta, gates) in cfg_attr_metas(attrs) {
        add(&meta, &gates);
    }
    found
}

/// The attributes that are part of an API: shown before the item.
fn api_attrs(attrs: &[Attribute]) -> String {
    let mut shown = String::new();
    for attr in attrs {
        let path = attr.path();
        let keep = path.is_ident("non_exhaustive")
            || path.is_ident("must_use")
            || path.is_ident("deprecated")
            || (path.is_ident("doc") && tokens(&attr.meta).contains("hidden"));
        if keep {
            let _ = write!(shown, "{} ", tokens(attr));
        }
    }
    shown
}

fn is_public(vis: &Visibility) -> bool {
    matches!(vis, Visibility::Public(_))
}

fn gate_note(gates: &BTreeSet<String>) -> String {
    if gates.is_empty() {
        String::new()
    } else {
        let names: Vec<String> = gates.iter().map(|g| format!("feature \"{g}\"")).collect();
        format!("  [{}]", names.join(", "))
    }
}

// ----- macro_rules expansion ----------------------------------------------------------------

/// The crate's `macro_rules!` definitions by name: `(matcher, transcriber)` per rule.
struct MacroRules(BTreeMap<String, Vec<(TokenStream, TokenStream)>>);

impl MacroRules {
    fn collect(modules: &[Vec<Item>]) -> MacroRules {
        let mut all = BTreeMap::new();
        let mut visit = |items: &[Item]| {
            for item in items {
                if let Item::Macro(def) = item
                    && def.mac.path.is_ident("macro_rules")
                    && let Some(name) = &def.ident
                {
                    let rules = parse_rules(def.mac.tokens.clone());
                    let previous = all.insert(name.to_string(), rules);
                    assert!(previous.is_none(), "two macro_rules! named {name}");
                }
            }
        };
        for items in modules {
            visit(items);
        }
        MacroRules(all)
    }
}

fn parse_rules(tokens: TokenStream) -> Vec<(TokenStream, TokenStream)> {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut rules = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let (TokenTree::Group(matcher), TokenTree::Group(body)) = (&tokens[i], &tokens[i + 3])
        else {
            panic!("a macro rule is `(matcher) => {{ body }}`");
        };
        rules.push((matcher.stream(), body.stream()));
        i += 4;
        if matches!(tokens.get(i), Some(TokenTree::Punct(p)) if p.as_char() == ';') {
            i += 1;
        }
    }
    rules
}

/// Expands the item macro invocations among `items` (a `macro_rules!` definition stays).
fn expand_items(items: Vec<Item>, macros: &MacroRules, depth: usize) -> Vec<Item> {
    assert!(depth < 8, "macro expansion does not terminate");
    let mut out = Vec::new();
    for item in items {
        let Item::Macro(invocation) = &item else {
            out.push(item);
            continue;
        };
        if invocation.ident.is_some() {
            out.push(item);
            continue;
        }
        let name = invocation
            .mac
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default();
        let Some(rules) = macros.0.get(&name) else {
            panic!("teach tests/public_api.rs the item macro `{name}!`");
        };
        let expansion = expand(rules, invocation.mac.tokens.clone())
            .unwrap_or_else(|| panic!("no rule of `{name}!` matches its invocation"));
        let file: syn::File = syn::parse2(expansion)
            .unwrap_or_else(|e| panic!("the expansion of `{name}!` is not items: {e}"));
        // The invocation's attributes (its cfg) apply to everything it expands to.
        let expanded = file.items.into_iter().map(|mut inner| {
            prepend_attrs(&mut inner, &invocation.attrs);
            inner
        });
        out.extend(expand_items(expanded.collect(), macros, depth + 1));
    }
    out
}

fn prepend_attrs(item: &mut Item, attrs: &[Attribute]) {
    let target = match item {
        Item::Const(i) => &mut i.attrs,
        Item::Enum(i) => &mut i.attrs,
        Item::Fn(i) => &mut i.attrs,
        Item::Impl(i) => &mut i.attrs,
        Item::Macro(i) => &mut i.attrs,
        Item::Mod(i) => &mut i.attrs,
        Item::Static(i) => &mut i.attrs,
        Item::Struct(i) => &mut i.attrs,
        Item::Trait(i) => &mut i.attrs,
        Item::Type(i) => &mut i.attrs,
        Item::Use(i) => &mut i.attrs,
        _ => return,
    };
    let mut all = attrs.to_vec();
    all.append(target);
    *target = all;
}

/// What a macro's matcher bound.
#[derive(Clone)]
enum Binding {
    /// A fragment's tokens, and whether they keep an invisible group around them (a type or
    /// an expression, so that it stays one unit where it is put).
    One(TokenStream, bool),
    Many(Vec<BTreeMap<String, Binding>>),
}

type Bindings = BTreeMap<String, Binding>;

fn expand(rules: &[(TokenStream, TokenStream)], input: TokenStream) -> Option<TokenStream> {
    rules.iter().find_map(|(matcher, body)| {
        let matcher: Vec<TokenTree> = matcher.clone().into_iter().collect();
        let mut bindings = Bindings::new();
        let parser = |stream: ParseStream| match_all(&matcher, stream, &mut bindings);
        parser.parse2(input.clone()).ok()?;
        Some(transcribe(body.clone(), &bindings))
    })
}

/// Matches all of `input`.
fn match_all(
    matcher: &[TokenTree],
    input: ParseStream,
    bindings: &mut Bindings,
) -> syn::Result<()> {
    match_seq(matcher, input, bindings)?;
    if input.is_empty() {
        Ok(())
    } else {
        Err(input.error("tokens left over"))
    }
}

/// Matches the start of `input`, leaving the rest.
fn match_seq(
    matcher: &[TokenTree],
    input: ParseStream,
    bindings: &mut Bindings,
) -> syn::Result<()> {
    let mut i = 0;
    while i < matcher.len() {
        match &matcher[i] {
            TokenTree::Punct(dollar) if dollar.as_char() == '$' => match &matcher[i + 1] {
                TokenTree::Ident(name) => {
                    let TokenTree::Ident(fragment) = &matcher[i + 3] else {
                        panic!("a fragment is `$name:kind`");
                    };
                    let binding = match fragment.to_string().as_str() {
                        "ident" => {
                            Binding::One(input.parse::<syn::Ident>()?.into_token_stream(), false)
                        }
                        "literal" => {
                            Binding::One(input.parse::<syn::Lit>()?.into_token_stream(), false)
                        }
                        "tt" => {
                            Binding::One(input.parse::<TokenTree>()?.into_token_stream(), false)
                        }
                        "ty" => Binding::One(input.parse::<syn::Type>()?.into_token_stream(), true),
                        "expr" => {
                            Binding::One(input.parse::<syn::Expr>()?.into_token_stream(), true)
                        }
                        "path" => {
                            Binding::One(input.parse::<syn::Path>()?.into_token_stream(), true)
                        }
                        other => panic!("teach tests/public_api.rs the fragment `{other}`"),
                    };
                    bindings.insert(name.to_string(), binding);
                    i += 4;
                }
                TokenTree::Group(repeated) => {
                    let inner: Vec<TokenTree> = repeated.stream().into_iter().collect();
                    let (separator, op, used) = repetition_tail(matcher, i + 2);
                    let mut rounds: Vec<Bindings> = Vec::new();
                    loop {
                        if op == '?' && !rounds.is_empty() {
                            break;
                        }
                        let fork = input.fork();
                        if !rounds.is_empty()
                            && let Some(separator) = &separator
                            && fork.parse::<TokenTree>().map(|t| t.to_string()).ok()
                                != Some(separator.clone())
                        {
                            break;
                        }
                        let mut round = Bindings::new();
                        if fork.is_empty() || match_seq(&inner, &fork, &mut round).is_err() {
                            break;
                        }
                        input.advance_to(&fork);
                        rounds.push(round);
                    }
                    for name in fragment_names(&inner) {
                        bindings.insert(name, Binding::Many(rounds.clone()));
                    }
                    i += 2 + used;
                }
                other => panic!("unexpected `${other}` in a matcher"),
            },
            TokenTree::Group(group) => {
                let inner: Vec<TokenTree> = group.stream().into_iter().collect();
                let content;
                match group.delimiter() {
                    Delimiter::Parenthesis => {
                        syn::parenthesized!(content in input);
                    }
                    Delimiter::Bracket => {
                        syn::bracketed!(content in input);
                    }
                    Delimiter::Brace => {
                        syn::braced!(content in input);
                    }
                    Delimiter::None => panic!("an invisible group in a matcher"),
                };
                match_all(&inner, &content, bindings)?;
                i += 1;
            }
            literal => {
                let got = input.parse::<TokenTree>()?;
                if got.to_string() != literal.to_string() {
                    return Err(syn::Error::new(got.span(), "no match"));
                }
                i += 1;
            }
        }
    }
    Ok(())
}

/// The separator and operator after `$( … )` at `matcher[at]`: `(separator, op, tokens used
/// after the group)`.
fn repetition_tail(matcher: &[TokenTree], at: usize) -> (Option<String>, char, usize) {
    let is_op =
        |t: &TokenTree| matches!(t, TokenTree::Punct(p) if matches!(p.as_char(), '*' | '+' | '?'));
    match (&matcher.get(at), &matcher.get(at + 1)) {
        (Some(t), _) if is_op(t) => (None, t.to_string().chars().next().unwrap_or('*'), 1),
        (Some(separator), Some(op)) if is_op(op) => (
            Some(separator.to_string()),
            op.to_string().chars().next().unwrap_or('*'),
            2,
        ),
        _ => panic!("a repetition ends in *, + or ?"),
    }
}

/// The `$name`s bound in a matcher.
fn fragment_names(matcher: &[TokenTree]) -> Vec<String> {
    let mut names = Vec::new();
    for (i, token) in matcher.iter().enumerate() {
        match token {
            TokenTree::Punct(p) if p.as_char() == '$' => {
                if let Some(TokenTree::Ident(name)) = matcher.get(i + 1) {
                    names.push(name.to_string());
                }
            }
            TokenTree::Group(group) => names.extend(fragment_names(
                &group.stream().into_iter().collect::<Vec<_>>(),
            )),
            _ => {}
        }
    }
    names
}

fn transcribe(body: TokenStream, bindings: &Bindings) -> TokenStream {
    let tokens: Vec<TokenTree> = body.into_iter().collect();
    let mut out = TokenStream::new();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Punct(dollar) if dollar.as_char() == '$' => match &tokens[i + 1] {
                TokenTree::Ident(name) if name == "crate" => {
                    out.extend([TokenTree::Ident(syn::Ident::new("crate", name.span()))]);
                    i += 2;
                }
                TokenTree::Ident(name) => {
                    match bindings.get(&name.to_string()) {
                        Some(Binding::One(tokens, true)) => out.extend([TokenTree::Group(
                            Group::new(Delimiter::None, tokens.clone()),
                        )]),
                        Some(Binding::One(tokens, false)) => out.extend(tokens.clone()),
                        _ => panic!("`${name}` is not bound to one fragment here"),
                    }
                    i += 2;
                }
                TokenTree::Group(repeated) => {
                    let (separator, _, used) = repetition_tail(&tokens, i + 2);
                    let names = transcriber_names(repeated.stream());
                    let rounds = names
                        .iter()
                        .find_map(|name| match bindings.get(name) {
                            Some(Binding::Many(rounds)) => Some(rounds.clone()),
                            _ => None,
                        })
                        .expect("a repetition uses a repeated fragment");
                    for (n, round) in rounds.iter().enumerate() {
                        if n > 0
                            && let Some(separator) = &separator
                        {
                            out.extend(separator.parse::<TokenStream>().expect("a separator"));
                        }
                        let mut scope = bindings.clone();
                        scope.extend(round.clone());
                        out.extend(transcribe(repeated.stream(), &scope));
                    }
                    i += 2 + used;
                }
                other => panic!("unexpected `${other}` in a transcriber"),
            },
            TokenTree::Group(group) => {
                let mut inner = Group::new(group.delimiter(), transcribe(group.stream(), bindings));
                inner.set_span(group.span());
                out.extend([TokenTree::Group(inner)]);
                i += 1;
            }
            other => {
                out.extend([other.clone()]);
                i += 1;
            }
        }
    }
    out
}

fn transcriber_names(body: TokenStream) -> Vec<String> {
    fragment_names(&body.into_iter().collect::<Vec<_>>())
}

// ----- name resolution ----------------------------------------------------------------------

/// What a name refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Def {
    Module(ModId),
    /// An item of a module, by index.
    Item(ModId, usize),
}

/// One name a `use` brings in: `(path, name)`, or a glob of `path`.
struct UseEntry {
    public: bool,
    path: Vec<String>,
    /// `None` for a glob.
    name: Option<String>,
}

fn use_entries(item: &syn::ItemUse) -> Vec<UseEntry> {
    fn walk(tree: &UseTree, prefix: &mut Vec<String>, public: bool, out: &mut Vec<UseEntry>) {
        match tree {
            UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                walk(&p.tree, prefix, public, out);
                prefix.pop();
            }
            UseTree::Name(n) => {
                let name = n.ident.to_string();
                let mut path = prefix.clone();
                let alias = if name == "self" {
                    prefix.last().cloned().unwrap_or_default()
                } else {
                    path.push(name.clone());
                    name
                };
                out.push(UseEntry {
                    public,
                    path,
                    name: Some(alias),
                });
            }
            UseTree::Rename(r) => {
                let mut path = prefix.clone();
                if r.ident != "self" {
                    path.push(r.ident.to_string());
                }
                out.push(UseEntry {
                    public,
                    path,
                    name: Some(r.rename.to_string()),
                });
            }
            UseTree::Glob(_) => out.push(UseEntry {
                public,
                path: prefix.clone(),
                name: None,
            }),
            UseTree::Group(g) => {
                for tree in &g.items {
                    walk(tree, prefix, public, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(&item.tree, &mut Vec::new(), is_public(&item.vis), &mut out);
    out
}

/// The name an item defines, if any.
fn item_name(item: &Item) -> Option<String> {
    let ident = match item {
        Item::Const(i) => &i.ident,
        Item::Enum(i) => &i.ident,
        Item::Fn(i) => &i.sig.ident,
        Item::Mod(i) => &i.ident,
        Item::Static(i) => &i.ident,
        Item::Struct(i) => &i.ident,
        Item::Trait(i) => &i.ident,
        Item::Type(i) => &i.ident,
        Item::Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}

impl Crate {
    /// Everything `name` means in module `id` (its items, then its imports).
    fn lookup(&self, id: ModId, name: &str, depth: usize) -> Vec<Def> {
        assert!(depth < 32, "the imports of {} loop", self.path_of(id));
        if let Some(child) = self.child(id, name) {
            return vec![Def::Module(child)];
        }
        let module = &self.modules[id];
        let defined: Vec<Def> = module
            .items
            .iter()
            .enumerate()
            .filter(|(_, item)| !matches!(item, Item::Mod(_)))
            .filter(|(_, item)| item_name(item).as_deref() == Some(name))
            .map(|(index, _)| Def::Item(id, index))
            .collect();
        if !defined.is_empty() {
            return defined;
        }
        let mut found = Vec::new();
        for item in &module.items {
            let Item::Use(item) = item else { continue };
            for entry in use_entries(item) {
                if entry.name.as_deref() == Some(name) {
                    found.extend(self.resolve(id, &entry.path, depth + 1));
                }
            }
        }
        if found.is_empty() {
            for item in &module.items {
                let Item::Use(item) = item else { continue };
                for entry in use_entries(item).into_iter().filter(|e| e.name.is_none()) {
                    for def in self.resolve(id, &entry.path, depth + 1) {
                        if let Def::Module(glob) = def {
                            found.extend(self.lookup(glob, name, depth + 1));
                        }
                    }
                }
            }
        }
        found.sort();
        found.dedup();
        found
    }

    /// What a path means in module `id`; empty for a path outside the crate.
    fn resolve(&self, id: ModId, path: &[String], depth: usize) -> Vec<Def> {
        let Some((first, rest)) = path.split_first() else {
            return vec![Def::Module(id)];
        };
        let mut current = match first.as_str() {
            "crate" => vec![Def::Module(0)],
            "self" => vec![Def::Module(id)],
            "super" => vec![Def::Module(
                self.modules[id].parent.expect("super of the root"),
            )],
            name => self.lookup(id, name, depth),
        };
        for segment in rest {
            let module = current.iter().find_map(|def| match def {
                Def::Module(m) => Some(*m),
                Def::Item(..) => None,
            });
            let Some(module) = module else {
                return Vec::new();
            };
            current = match segment.as_str() {
                "super" => vec![Def::Module(
                    self.modules[module].parent.expect("super of the root"),
                )],
                name => self.lookup(module, name, depth + 1),
            };
        }
        current
    }

    /// The item a type path in module `id` names (generic arguments ignored).
    fn resolve_type(&self, id: ModId, mut ty: &syn::Type) -> Option<Def> {
        while let syn::Type::Group(syn::TypeGroup { elem, .. })
        | syn::Type::Paren(syn::TypeParen { elem, .. }) = ty
        {
            ty = elem;
        }
        let syn::Type::Path(ty) = ty else { return None };
        if ty.qself.is_some() {
            return None;
        }
        let path: Vec<String> = ty
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        self.resolve(id, &path, 0)
            .into_iter()
            .find(|def| matches!(def, Def::Item(..)))
    }

    fn item(&self, def: Def) -> Option<&Item> {
        match def {
            Def::Item(m, index) => self.modules[m].items.get(index),
            Def::Module(_) => None,
        }
    }

    fn gates_of(&self, def: Def) -> BTreeSet<String> {
        match def {
            Def::Module(m) => self.modules[m].gates.clone(),
            Def::Item(m, index) => {
                let mut gates = self.modules[m].gates.clone();
                if let Cfg::On(more) = cfg(attrs_of(&self.modules[m].items[index])) {
                    gates.extend(more);
                }
                gates
            }
        }
    }
}

// ----- what is public, and where ------------------------------------------------------------

impl Crate {
    /// Every public item with every path it can be named by, and the features each path
    /// needs.
    fn public_paths(&self) -> BTreeMap<Def, Paths> {
        let mut paths: BTreeMap<Def, Paths> = BTreeMap::new();
        let mut visited = BTreeSet::new();
        self.walk_public(
            0,
            CRATE.to_owned(),
            &BTreeSet::new(),
            &mut paths,
            &mut visited,
        );
        // `#[macro_export]` puts a macro at the crate root, wherever it is defined.
        for (id, module) in self.modules.iter().enumerate() {
            for (index, item) in module.items.iter().enumerate() {
                if let Item::Macro(def) = item
                    && let Some(name) = &def.ident
                    && def.attrs.iter().any(|a| a.path().is_ident("macro_export"))
                {
                    let def = Def::Item(id, index);
                    paths
                        .entry(def)
                        .or_default()
                        .insert(format!("{CRATE}::{name}!"), self.gates_of(def));
                }
            }
        }
        paths
    }

    /// Records the public names of module `id`, reached at path `at` under `gates`.
    fn walk_public(
        &self,
        id: ModId,
        at: String,
        gates: &BTreeSet<String>,
        paths: &mut BTreeMap<Def, Paths>,
        visited: &mut BTreeSet<(ModId, String)>,
    ) {
        if !visited.insert((id, at.clone())) {
            return;
        }
        let with = |more: &BTreeSet<String>| -> BTreeSet<String> {
            gates.iter().chain(more).cloned().collect()
        };
        for child in self.children(id) {
            let module = &self.modules[child];
            if module.public {
                let path = format!("{at}::{}", module.name);
                let child_gates =
                    with(&module.gates.union(&module.public_gates).cloned().collect());
                paths
                    .entry(Def::Module(child))
                    .or_default()
                    .insert(path.clone(), child_gates.clone());
                self.walk_public(child, path, &child_gates, paths, visited);
            }
        }
        for (index, item) in self.modules[id].items.iter().enumerate() {
            match item {
                Item::Mod(_) | Item::Impl(_) | Item::Macro(_) => {}
                Item::Use(use_item) => {
                    let Cfg::On(use_gates) = cfg(&use_item.attrs) else {
                        continue;
                    };
                    for entry in use_entries(use_item).into_iter().filter(|e| e.public) {
                        let Some(name) = entry.name else {
                            panic!(
                                "`pub use {}::*` in {}: re-export by name",
                                entry.path.join("::"),
                                self.path_of(id)
                            );
                        };
                        let targets = self.resolve(id, &entry.path, 0);
                        assert!(
                            !targets.is_empty(),
                            "cannot resolve `pub use {}` in {}",
                            entry.path.join("::"),
                            self.path_of(id)
                        );
                        for target in targets {
                            let path = format!("{at}::{name}");
                            let mut target_gates = with(&use_gates);
                            target_gates.extend(self.gates_of(target));
                            paths
                                .entry(target)
                                .or_default()
                                .insert(path.clone(), target_gates.clone());
                            if let Def::Module(module) = target {
                                self.walk_public(module, path, &target_gates, paths, visited);
                            }
                        }
                    }
                }
                item => {
                    if let Some(name) = item_name(item)
                        && item_visibility(item).is_some_and(is_public)
                    {
                        let def = Def::Item(id, index);
                        paths
                            .entry(def)
                            .or_default()
                            .insert(format!("{at}::{name}"), with(&self.gates_of(def)));
                    }
                }
            }
        }
    }
}

/// The public paths of one item, with the features each needs.
type Paths = BTreeMap<String, BTreeSet<String>>;

fn item_visibility(item: &Item) -> Option<&Visibility> {
    Some(match item {
        Item::Const(i) => &i.vis,
        Item::Enum(i) => &i.vis,
        Item::Fn(i) => &i.vis,
        Item::Mod(i) => &i.vis,
        Item::Static(i) => &i.vis,
        Item::Struct(i) => &i.vis,
        Item::Trait(i) => &i.vis,
        Item::Type(i) => &i.vis,
        Item::Union(i) => &i.vis,
        Item::Use(i) => &i.vis,
        _ => return None,
    })
}

// ----- the listing --------------------------------------------------------------------------

/// What is listed under a type or trait besides its own shape.
#[derive(Default)]
struct Extras {
    /// `impl Trait` lines, with the features each needs.
    impls: BTreeMap<String, BTreeSet<String>>,
    /// Public inherent methods, constants and types by `(name, line)`, with their features.
    members: BTreeMap<(String, String), BTreeSet<String>>,
}

impl Crate {
    fn listing(&self) -> String {
        let paths = self.public_paths();
        let twice: Vec<String> = paths
            .values()
            .filter(|p| p.len() > 1)
            .map(|p| p.keys().cloned().collect::<Vec<_>>().join(" and "))
            .collect();
        assert!(
            twice.is_empty(),
            "items with more than one public path: {twice:#?}"
        );

        let public: BTreeSet<Def> = paths.keys().copied().collect();
        let extras = self.extras(&public);
        // By module, then by name ignoring case: the root's items, then each public module's.
        let mut entries: Vec<((String, String, String), String)> = paths
            .iter()
            .map(|(def, at)| {
                let (path, gates) = at.iter().next().expect("a public item has a path");
                let text = self.describe(*def, path, gates, extras.get(def));
                let (module, name) = path.rsplit_once("::").unwrap_or(("", path));
                // A module heads its own items.
                let key = match def {
                    Def::Module(_) => (path.clone(), String::new(), path.clone()),
                    Def::Item(..) => (module.to_owned(), name.to_lowercase(), path.clone()),
                };
                (key, text)
            })
            .collect();
        entries.sort();

        let mut out = String::from(
            "# The public API of the `runcore` crate: every item at the one path it is named by,\n\
             # read from the source by tests/public_api.rs with every feature on (what a feature\n\
             # gates says so). A diff here is an API change: review it as one.\n",
        );
        for (_, text) in entries {
            out.push('\n');
            out.push_str(&text);
        }
        out
    }

    /// The impls and inherent members of every public type and trait.
    fn extras(&self, public: &BTreeSet<Def>) -> BTreeMap<Def, Extras> {
        let mut extras: BTreeMap<Def, Extras> = BTreeMap::new();
        for (id, module) in self.modules.iter().enumerate() {
            for item in &module.items {
                let Item::Impl(block) = item else { continue };
                let Cfg::On(mut gates) = cfg(&block.attrs) else {
                    continue;
                };
                gates.extend(module.gates.iter().cloned());
                let owner = self
                    .resolve_type(id, &block.self_ty)
                    .filter(|d| public.contains(d));
                match &block.trait_ {
                    Some((trait_path, _)) => {
                        let trait_def = self
                            .resolve(id, &segments(trait_path), 0)
                            .into_iter()
                            .find(|d| matches!(d, Def::Item(..)));
                        // A crate-private trait, or one over a crate-private type (the
                        // `From<…Repr>` of a serde wire representation): nobody can use it.
                        if trait_def.is_some_and(|d| !public.contains(&d))
                            || self.mentions_private(id, trait_path, public)
                        {
                            continue;
                        }
                        match (owner, trait_def) {
                            (Some(owner), _) => {
                                let line = impl_header(block, trait_path, false);
                                extras.entry(owner).or_default().impls.insert(line, gates);
                            }
                            // A blanket impl of a public trait: listed under the trait.
                            (None, Some(trait_def)) if !self.is_crate_type(id, &block.self_ty) => {
                                let line = impl_header(block, trait_path, true);
                                extras
                                    .entry(trait_def)
                                    .or_default()
                                    .impls
                                    .insert(line, gates);
                            }
                            _ => {}
                        }
                    }
                    None => {
                        let Some(owner) = owner else { continue };
                        for member in &block.items {
                            if let Some((key, member_gates)) = inherent_member(member, &gates) {
                                extras
                                    .entry(owner)
                                    .or_default()
                                    .members
                                    .insert(key, member_gates);
                            }
                        }
                    }
                }
            }
        }
        extras
    }

    /// Whether a path's generic arguments name a type of this crate that is not public.
    fn mentions_private(&self, id: ModId, path: &syn::Path, public: &BTreeSet<Def>) -> bool {
        let mut collector = TypePaths(Vec::new());
        collector.visit_path_mut(&mut path.clone());
        collector.0.iter().any(|path| {
            self.resolve(id, path, 0)
                .into_iter()
                .any(|def| matches!(def, Def::Item(..)) && !public.contains(&def))
        })
    }

    /// Whether `ty` names an item of this crate (so an impl for it is not a blanket impl).
    fn is_crate_type(&self, id: ModId, ty: &syn::Type) -> bool {
        self.resolve_type(id, ty).is_some()
    }

    fn describe(
        &self,
        def: Def,
        path: &str,
        gates: &BTreeSet<String>,
        extras: Option<&Extras>,
    ) -> String {
        let note = gate_note(gates);
        let mut out = String::new();
        let mut impls: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let Some(item) = self.item(def) else {
            let _ = writeln!(out, "mod {path}{note}");
            return out;
        };
        match item {
            Item::Struct(s) => {
                let _ = writeln!(
                    out,
                    "{}struct {path}{}{note}",
                    api_attrs(&s.attrs),
                    generics(&s.generics)
                );
                fields(&mut out, &s.fields, "    field ");
                impls.extend(derived_impls(&s.attrs, &[&s.fields]));
            }
            Item::Enum(e) => {
                let _ = writeln!(
                    out,
                    "{}enum {path}{}{note}",
                    api_attrs(&e.attrs),
                    generics(&e.generics)
                );
                for variant in &e.variants {
                    let mut shape = String::new();
                    match &variant.fields {
                        Fields::Named(named) => {
                            let list: Vec<String> = named
                                .named
                                .iter()
                                .map(|f| {
                                    format!(
                                        "{}: {}",
                                        f.ident.as_ref().map(|i| i.to_string()).unwrap_or_default(),
                                        tokens(&short_paths(&f.ty))
                                    )
                                })
                                .collect();
                            let _ = write!(shape, " {{ {} }}", list.join(", "));
                        }
                        Fields::Unnamed(unnamed) => {
                            let list: Vec<String> = unnamed
                                .unnamed
                                .iter()
                                .map(|f| tokens(&short_paths(&f.ty)))
                                .collect();
                            let _ = write!(shape, "({})", list.join(", "));
                        }
                        Fields::Unit => {}
                    }
                    if let Some((_, discriminant)) = &variant.discriminant {
                        let _ = write!(shape, " = {}", tokens(discriminant));
                    }
                    let _ = writeln!(
                        out,
                        "    variant {}{}{shape}",
                        api_attrs(&variant.attrs),
                        variant.ident
                    );
                }
                let all_fields: Vec<&Fields> = e.variants.iter().map(|v| &v.fields).collect();
                impls.extend(derived_impls(&e.attrs, &all_fields));
            }
            Item::Trait(t) => {
                let supertraits = if t.supertraits.is_empty() {
                    String::new()
                } else {
                    format!(": {}", tokens(&short_paths(&t.supertraits)))
                };
                let _ = writeln!(
                    out,
                    "{}trait {path}{}{supertraits}{note}",
                    api_attrs(&t.attrs),
                    generics(&t.generics)
                );
                for member in &t.items {
                    match member {
                        TraitItem::Fn(f) => {
                            let provided = if f.default.is_some() {
                                " (provided)"
                            } else {
                                ""
                            };
                            let _ = writeln!(
                                out,
                                "    {}{}{provided}",
                                api_attrs(&f.attrs),
                                tokens(&short_paths(&f.sig))
                            );
                        }
                        TraitItem::Type(ty) => {
                            let _ = writeln!(out, "    type {}", ty.ident);
                        }
                        TraitItem::Const(c) => {
                            let _ = writeln!(
                                out,
                                "    const {}: {}",
                                c.ident,
                                tokens(&short_paths(&c.ty))
                            );
                        }
                        other => {
                            panic!("teach tests/public_api.rs the trait item {}", tokens(other))
                        }
                    }
                }
            }
            Item::Fn(f) => {
                // The signature with the function's name replaced by its path.
                let signature = tokens(&short_paths(&f.sig)).replacen(
                    &format!("fn {}", f.sig.ident),
                    &format!("fn {path}"),
                    1,
                );
                let _ = writeln!(out, "{}{signature}{note}", api_attrs(&f.attrs));
            }
            Item::Const(c) => {
                let _ = writeln!(
                    out,
                    "const {path}: {}{}{note}",
                    tokens(&short_paths(&*c.ty)),
                    simple_value(&c.expr)
                );
            }
            Item::Static(s) => {
                let _ = writeln!(out, "static {path}: {}{note}", tokens(&short_paths(&*s.ty)));
            }
            Item::Type(t) => {
                let _ = writeln!(
                    out,
                    "type {path}{} = {}{note}",
                    generics(&t.generics),
                    tokens(&short_paths(&*t.ty))
                );
            }
            Item::Macro(m) => {
                let name = m.ident.as_ref().map(|i| i.to_string()).unwrap_or_default();
                let _ = writeln!(out, "macro {path}{note}");
                for (matcher, _) in parse_rules(m.mac.tokens.clone()) {
                    let _ = writeln!(out, "    rule {name}!({})", matcher_text(matcher));
                }
            }
            other => panic!("teach tests/public_api.rs to list {}", tokens(other)),
        }
        // Features an impl or a member needs beyond the item's own.
        let extra_note =
            |more: &BTreeSet<String>| gate_note(&more.difference(gates).cloned().collect());
        if let Some(extras) = extras {
            impls.extend(
                extras
                    .impls
                    .iter()
                    .map(|(line, g)| (line.clone(), g.clone())),
            );
        }
        for (line, impl_gates) in &impls {
            let _ = writeln!(out, "    {line}{}", extra_note(impl_gates));
        }
        if let Some(extras) = extras {
            for ((_, line), member_gates) in &extras.members {
                let _ = writeln!(out, "    {line}{}", extra_note(member_gates));
            }
        }
        out
    }
}

fn segments(path: &syn::Path) -> Vec<String> {
    path.segments.iter().map(|s| s.ident.to_string()).collect()
}

/// The paths of the types inside a node.
struct TypePaths(Vec<Vec<String>>);

impl VisitMut for TypePaths {
    fn visit_type_path_mut(&mut self, ty: &mut syn::TypePath) {
        self.0.push(segments(&ty.path));
        syn::visit_mut::visit_type_path_mut(self, ty);
    }
}

/// `impl<…> Trait` (the trait by its name, with its generic arguments), `for Type` too for a
/// blanket impl. Generics that are only lifetimes are left out (`impl<'de> Deserialize<'de>`
/// is `impl Deserialize`), so a derived and a hand-written impl read the same.
fn impl_header(block: &syn::ItemImpl, trait_path: &syn::Path, with_self: bool) -> String {
    let lifetimes_only = block
        .generics
        .params
        .iter()
        .all(|p| matches!(p, syn::GenericParam::Lifetime(_)));
    let mut trait_path = trait_path.clone();
    Shortener.visit_path_mut(&mut trait_path);
    let Some(mut last) = trait_path.segments.last().cloned() else {
        panic!("an impl of an empty trait path");
    };
    if lifetimes_only
        && let syn::PathArguments::AngleBracketed(args) = &last.arguments
        && args
            .args
            .iter()
            .all(|a| matches!(a, syn::GenericArgument::Lifetime(_)))
    {
        last.arguments = syn::PathArguments::None;
    }
    let mut header = String::from("impl");
    if !lifetimes_only {
        header.push_str(&tokens(&short_paths(&block.generics)));
    }
    let _ = write!(header, " {}", tokens(&last));
    if with_self {
        let _ = write!(header, " for {}", tokens(&short_paths(&*block.self_ty)));
    }
    if let Some(clause) = &block.generics.where_clause {
        let _ = write!(header, " {}", tokens(&short_paths(clause)));
    }
    header
}

/// One public member of an inherent impl: `((name, line), features)`.
type Member = ((String, String), BTreeSet<String>);

fn inherent_member(member: &ImplItem, gates: &BTreeSet<String>) -> Option<Member> {
    let (attrs, vis, name, text) = match member {
        ImplItem::Fn(f) => (&f.attrs, &f.vis, &f.sig.ident, tokens(&short_paths(&f.sig))),
        ImplItem::Const(c) => (
            &c.attrs,
            &c.vis,
            &c.ident,
            format!("const {}: {}", c.ident, tokens(&short_paths(&c.ty))),
        ),
        ImplItem::Type(t) => (
            &t.attrs,
            &t.vis,
            &t.ident,
            format!("type {} = {}", t.ident, tokens(&short_paths(&t.ty))),
        ),
        _ => return None,
    };
    if !is_public(vis) {
        return None;
    }
    let Cfg::On(mut member_gates) = cfg(attrs) else {
        return None;
    };
    member_gates.extend(gates.iter().cloned());
    let line = format!("{}{text}", api_attrs(attrs));
    Some(((name.to_string(), line), member_gates))
}

fn generics(generics: &syn::Generics) -> String {
    let mut text = String::new();
    if !generics.params.is_empty() {
        text.push_str(&tokens(&short_paths(generics)));
    }
    if let Some(clause) = &generics.where_clause {
        let _ = write!(text, " {}", tokens(&short_paths(clause)));
    }
    text
}

fn fields(out: &mut String, fields: &Fields, prefix: &str) {
    let mut private = false;
    for (index, field) in fields.iter().enumerate() {
        if !is_public(&field.vis) {
            private = true;
            continue;
        }
        let name = field
            .ident
            .as_ref()
            .map(|i| i.to_string())
            .unwrap_or_else(|| index.to_string());
        let _ = writeln!(
            out,
            "{prefix}{}{name}: {}",
            api_attrs(&field.attrs),
            tokens(&short_paths(&field.ty))
        );
    }
    if private {
        let _ = writeln!(out, "    (private fields)");
    }
}

/// The impls an item's derives make: one per derive, and for thiserror's `Error` also
/// `Display` and the `From` of each `#[from]` field.
fn derived_impls(
    attrs: &[Attribute],
    all_fields: &[&Fields],
) -> BTreeMap<String, BTreeSet<String>> {
    let mut impls = BTreeMap::new();
    for (path, gates) in derives(attrs) {
        let name = path.rsplit("::").next().unwrap_or(&path).trim().to_owned();
        if name == "Error" {
            impls.insert("impl Display".to_owned(), gates.clone());
            for fields in all_fields {
                for field in fields.iter() {
                    if field.attrs.iter().any(|a| a.path().is_ident("from")) {
                        let line = format!("impl From<{}>", tokens(&short_paths(&field.ty)));
                        impls.insert(line, gates.clone());
                    }
                }
            }
        }
        impls.insert(format!("impl {name}"), gates);
    }
    impls
}

/// ` = value` for a constant whose value is a plain expression (no macro, short).
fn simple_value(expr: &syn::Expr) -> String {
    let text = tokens(expr);
    let plain = matches!(
        expr,
        syn::Expr::Lit(_) | syn::Expr::Binary(_) | syn::Expr::Unary(_)
    );
    if plain && text.len() <= 40 {
        format!(" = {text}")
    } else {
        String::new()
    }
}

/// A copy of `node` with every path shortened to its last segment (`crate::run::EndCause`,
/// `serde_json::Value`: `EndCause`, `Value`), so that a signature reads the same however its
/// file imports the names, and shows no private module names; and without `mut` on
/// parameters.
fn short_paths<T: Clone + ShortPaths>(node: &T) -> T {
    let mut node = node.clone();
    node.shorten();
    node
}

trait ShortPaths {
    fn shorten(&mut self);
}

struct Shortener;

impl VisitMut for Shortener {
    // `mut` on a parameter is the function's own business, not its signature's.
    fn visit_pat_ident_mut(&mut self, pat: &mut syn::PatIdent) {
        pat.mutability = None;
        syn::visit_mut::visit_pat_ident_mut(self, pat);
    }

    fn visit_receiver_mut(&mut self, receiver: &mut syn::Receiver) {
        // `mut self` (the binding), not `&mut self` (the receiver's kind).
        receiver.mutability = None;
        syn::visit_mut::visit_receiver_mut(self, receiver);
    }

    fn visit_path_mut(&mut self, path: &mut syn::Path) {
        syn::visit_mut::visit_path_mut(self, path);
        if path.segments.len() > 1 {
            let last = path.segments.pop();
            path.segments.clear();
            path.segments.extend(last);
            path.leading_colon = None;
        }
    }
}

macro_rules! shorten_with {
    ($($ty:ty => $visit:ident),* $(,)?) => {
        $(impl ShortPaths for $ty {
            fn shorten(&mut self) {
                Shortener.$visit(self);
            }
        })*
    };
}

shorten_with!(
    syn::Type => visit_type_mut,
    syn::Signature => visit_signature_mut,
    syn::Generics => visit_generics_mut,
    syn::WhereClause => visit_where_clause_mut,
    syn::Path => visit_path_mut,
    Punctuated<syn::TypeParamBound, syn::Token![+]> => visit_bounds_mut,
);

trait VisitBounds {
    fn visit_bounds_mut(&mut self, bounds: &mut Punctuated<syn::TypeParamBound, syn::Token![+]>);
}

impl VisitBounds for Shortener {
    fn visit_bounds_mut(&mut self, bounds: &mut Punctuated<syn::TypeParamBound, syn::Token![+]>) {
        for bound in bounds.iter_mut() {
            self.visit_type_param_bound_mut(bound);
        }
    }
}

// ----- printing tokens ----------------------------------------------------------------------

/// What was printed last, to decide the space before the next token.
#[derive(Clone, Copy, PartialEq)]
enum Prev {
    Start,
    /// An identifier, keyword or literal.
    Word,
    /// An opening delimiter.
    Open,
    /// A closing delimiter.
    Close,
    /// Something the next token sticks to (`::`, `&`, `<`, `'`, …).
    Tight,
    /// `,` or `;`.
    Comma,
    /// `:`.
    Colon,
    /// An operator with spaces around it (`->`, `=`, `+`, …).
    Spaced,
    /// `>` closing generic arguments.
    CloseAngle,
}

/// A node as one line of Rust, spaced as rustfmt would, without the trailing commas rustfmt
/// adds to a list it breaks over lines (so a reformat of the source changes nothing here).
fn tokens<T: ToTokens>(node: &T) -> String {
    let mut out = String::new();
    let mut prev = Prev::Start;
    write_tokens(node.to_token_stream(), &mut out, &mut prev);
    out.replace(",)", ")")
        .replace(",>", ">")
        .trim_end_matches(',')
        .to_owned()
}

fn spaced_after(prev: Prev) -> bool {
    matches!(
        prev,
        Prev::Word | Prev::Close | Prev::Comma | Prev::Colon | Prev::Spaced | Prev::CloseAngle
    )
}

fn write_tokens(stream: TokenStream, out: &mut String, prev: &mut Prev) {
    let mut iter = stream.into_iter().peekable();
    while let Some(token) = iter.next() {
        match token {
            TokenTree::Ident(ident) => word(out, prev, &ident.to_string()),
            TokenTree::Literal(literal) => word(out, prev, &literal.to_string()),
            TokenTree::Group(group) => {
                let (open, close) = match group.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::Brace => ("{ ", " }"),
                    Delimiter::None => {
                        write_tokens(group.stream(), out, prev);
                        continue;
                    }
                };
                let space = match group.delimiter() {
                    // `f(…)`, `Fn(…)`: sticks to a word.
                    Delimiter::Parenthesis => {
                        matches!(*prev, Prev::Comma | Prev::Colon | Prev::Spaced)
                    }
                    _ => spaced_after(*prev),
                };
                if space {
                    out.push(' ');
                }
                out.push_str(open);
                *prev = Prev::Open;
                write_tokens(group.stream(), out, prev);
                out.push_str(close);
                *prev = Prev::Close;
            }
            TokenTree::Punct(punct) => {
                if punct.as_char() == '\'' {
                    // A lifetime: the identifier after it sticks to it.
                    if spaced_after(*prev) {
                        out.push(' ');
                    }
                    out.push('\'');
                    *prev = Prev::Tight;
                    continue;
                }
                let mut op = String::from(punct.as_char());
                let mut spacing = punct.spacing();
                while spacing == Spacing::Joint {
                    match iter.peek() {
                        Some(TokenTree::Punct(next)) if next.as_char() != '\'' => {
                            op.push(next.as_char());
                            spacing = next.spacing();
                            iter.next();
                        }
                        _ => break,
                    }
                }
                match op.as_str() {
                    "," | ";" => {
                        out.push_str(&op);
                        *prev = Prev::Comma;
                    }
                    ":" => {
                        out.push(':');
                        *prev = Prev::Colon;
                    }
                    ">" => {
                        out.push('>');
                        *prev = Prev::CloseAngle;
                    }
                    // `*` after a word or a closing delimiter is a multiplication.
                    "*" if matches!(*prev, Prev::Word | Prev::Close) => {
                        out.push_str(" * ");
                        *prev = Prev::Tight;
                    }
                    "&" | "*" | "!" | "?" | "#" => {
                        if spaced_after(*prev) {
                            out.push(' ');
                        }
                        out.push_str(&op);
                        *prev = Prev::Tight;
                    }
                    "->" | "=" | "+" | "=>" | "|" | "==" => {
                        out.push(' ');
                        out.push_str(&op);
                        *prev = Prev::Spaced;
                    }
                    _ => {
                        out.push_str(&op);
                        *prev = Prev::Tight;
                    }
                }
            }
        }
    }
}

fn word(out: &mut String, prev: &mut Prev, text: &str) {
    if spaced_after(*prev) {
        out.push(' ');
    }
    out.push_str(text);
    *prev = Prev::Word;
}

/// A macro rule's matcher as it is written: `$make:expr $(,)?`.
fn matcher_text(stream: TokenStream) -> String {
    let mut out = String::new();
    // Whether the next word or `$` takes a space before it.
    let mut space = false;
    for token in stream {
        match token {
            TokenTree::Ident(_) | TokenTree::Literal(_) => {
                if space {
                    out.push(' ');
                }
                out.push_str(&token.to_string());
                space = true;
            }
            TokenTree::Group(group) => {
                let (open, close) = match group.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::Brace => ("{", "}"),
                    Delimiter::None => ("", ""),
                };
                let _ = write!(out, "{open}{}{close}", matcher_text(group.stream()));
                space = true;
            }
            TokenTree::Punct(punct) => {
                let c = punct.as_char();
                if matches!(c, '$' | '@') && space {
                    out.push(' ');
                }
                out.push(c);
                // After `$`, `@` and `:` the next token sticks; after `,`, `;` and a
                // repetition operator it is spaced.
                space = matches!(c, ',' | ';' | '*' | '+' | '?');
            }
        }
    }
    out
}
