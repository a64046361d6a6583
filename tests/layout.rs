//! The layout tells the truth (issue 42, item 3): the files of the core crate's `src/` import
//! one another without a cycle, and so do those of the edge crates in [`EDGE_CRATES`].
//!
//! The test reads every `.rs` file under `src/` with `syn` and builds the file-level import
//! graph, then fails listing every cycle it finds (each strongly connected component of more
//! than one file, with one cycle through it spelled out).
//!
//! The rules:
//! - A file is a module: `src/lib.rs` is the crate root, `src/a.rs` and `src/a/mod.rs` are
//!   `crate::a`, `src/a/b.rs` is `crate::a::b`. Inline modules (`mod tests { … }`) belong to
//!   the file they are written in.
//! - A file imports another when it names an item the other file defines: in a `use` item
//!   (anywhere in the file, function bodies included) or in a path written in
//!   the code (`crate::a::X`, `super::X`, or `a::X` through a name the file imported). A path is resolved to the file
//!   that *defines* the item it names, following `use` re-exports (named and glob) through the
//!   modules on the way, so a parent module's `pub use child::Item` does not make users of
//!   `crate::parent::Item` depend on the parent. A path that names a module itself (`use
//!   crate::store;`) imports that module's file.
//! - A parent declaring `mod child;` is not an import, and neither is a parent's `use` of its
//!   own descendants (re-exports included: a parent publishes its children). A child using its
//!   parent's items (`super::X`, `crate::parent::X` defined in the parent's file) is an import.
//! - Naming an item of one's own file is not an import.
//! - Code under `#[cfg(test)]` (a file's unit tests) is not part of the layout: it is not
//!   compiled into the crate, and a test may set up its case with any module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit_mut::VisitMut;
use syn::{Item, UseTree};

/// A module path below the crate root (`["store", "claims"]` for `crate::store::claims`).
type ModPath = Vec<String>;

/// One file of the crate: its module, what it defines and re-exports.
struct SourceFile {
    /// The file, relative to the crate directory (`src/store/claims.rs`).
    name: String,
    /// Its parsed content.
    ast: syn::File,
}

/// What a module's file makes nameable under the module's path.
#[derive(Default)]
struct Names {
    /// Items defined in the file (functions, types, traits, constants, statics, macros).
    defined: BTreeSet<String>,
    /// Names brought in by `use`: the name and the absolute path it stands for.
    imported: BTreeMap<String, ModPath>,
    /// Glob imports: absolute paths of the modules (or enums) whose names come in.
    globs: Vec<ModPath>,
}

/// The whole crate: every file by module path, and the names each one makes.
struct Crate {
    files: BTreeMap<ModPath, SourceFile>,
    names: BTreeMap<ModPath, Names>,
}

#[test]
fn the_core_crate_has_no_import_cycles() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let krate = Crate::load(dir, "src");
    let cycles = krate.cycles();
    assert!(
        cycles.is_empty(),
        "{} import cycle(s) among the files of src/:\n{}",
        cycles.len(),
        cycles.join("\n")
    );
}

/// The edge crates whose files the same rules hold to (issue 42: the Node binding's, the
/// Python binding's and the OTLP exporter's cycles).
const EDGE_CRATES: &[&str] = &["traces/otlp", "bindings/python", "bindings/node"];

#[test]
fn the_edge_crates_have_no_import_cycles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for dir in EDGE_CRATES {
        let krate = Crate::load(&root.join(dir), "src");
        found.extend(krate.cycles().into_iter().map(|c| format!("{dir}: {c}")));
    }
    assert!(
        found.is_empty(),
        "{} import cycle(s) in the edge crates:\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let files = [
        ("src/lib.rs", "mod a; mod b; mod c; pub use a::A;"),
        ("src/a.rs", "use crate::b::B; pub struct A;"),
        ("src/b.rs", "pub struct B(crate::c::C);"),
        ("src/c.rs", "pub struct C; fn f() -> crate::A { crate::A }"),
    ];
    let krate = Crate::from_sources(files.iter().map(|(n, s)| (n.to_string(), s.to_string())));
    assert_eq!(
        krate.cycles(),
        vec!["src/a.rs -> src/b.rs -> src/c.rs -> src/a.rs".to_string()]
    );
}

#[test]
fn unit_tests_are_not_part_of_the_layout() {
    let files = [
        ("src/lib.rs", "mod a; mod b;"),
        (
            "src/a.rs",
            "pub struct A; #[cfg(test)] mod tests { use crate::b::B; }",
        ),
        ("src/b.rs", "pub struct B(crate::a::A);"),
    ];
    let krate = Crate::from_sources(files.iter().map(|(n, s)| (n.to_string(), s.to_string())));
    assert_eq!(krate.cycles(), Vec::<String>::new());
}

#[test]
fn a_parent_publishing_its_child_is_not_a_cycle() {
    let files = [
        ("src/lib.rs", "pub mod p;"),
        (
            "src/p/mod.rs",
            "mod child; pub use child::Child; pub struct Parent; fn f() -> Child { child::make() }",
        ),
        (
            "src/p/child.rs",
            "pub struct Child(super::Parent); pub fn make() -> Child { todo!() }",
        ),
    ];
    let krate = Crate::from_sources(files.iter().map(|(n, s)| (n.to_string(), s.to_string())));
    assert_eq!(krate.cycles(), Vec::<String>::new());
}

impl Crate {
    /// Reads every `.rs` file under `dir/src_dir`.
    fn load(dir: &Path, src_dir: &str) -> Crate {
        let mut found = Vec::new();
        collect_rs(&dir.join(src_dir), &mut found);
        let sources = found.into_iter().map(|path| {
            let name = path
                .strip_prefix(dir)
                .unwrap_or(&path)
                .to_string_lossy()
                .replace('\\', "/");
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            (name, text)
        });
        Crate::from_sources(sources)
    }

    /// Builds the crate from `(file name relative to the crate, source text)` pairs.
    fn from_sources(sources: impl IntoIterator<Item = (String, String)>) -> Crate {
        let mut files = BTreeMap::new();
        let mut names = BTreeMap::new();
        for (name, text) in sources {
            let Some(module) = module_of(&name) else {
                continue;
            };
            let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("cannot parse {name}: {e}"));
            let mut file_names = Names::default();
            collect_names(&module, &ast.items, &mut file_names);
            names.insert(module.clone(), file_names);
            files.insert(module, SourceFile { name, ast });
        }
        Crate { files, names }
    }

    /// The module of the file that defines what `path` (absolute) names, if it is in the crate.
    fn resolve(&self, path: &[String], depth: usize) -> Option<ModPath> {
        if depth > 16 {
            return None;
        }
        // The longest prefix of the path that is a file's module.
        let mut len = path.len();
        while len > 0 && !self.files.contains_key(&path[..len]) {
            len -= 1;
        }
        let module = path[..len].to_vec();
        let Some(name) = path.get(len) else {
            return Some(module);
        };
        let names = self.names.get(&module)?;
        if names.defined.contains(name) {
            return Some(module);
        }
        if let Some(target) = names.imported.get(name) {
            let mut full = target.clone();
            full.extend(path[len + 1..].iter().cloned());
            return self.resolve(&full, depth + 1).or(Some(module));
        }
        for glob in &names.globs {
            let mut full = glob.clone();
            full.extend(path[len..].iter().cloned());
            if let Some(found) = self.resolve(&full, depth + 1)
                && found != module
                && self.defines(&found, &full)
            {
                return Some(found);
            }
        }
        Some(module)
    }

    /// Whether the file of `module` defines (or imports) the name `path` reaches in it.
    fn defines(&self, module: &ModPath, path: &[String]) -> bool {
        let Some(name) = path.get(module.len()) else {
            return true;
        };
        self.names
            .get(module)
            .is_some_and(|n| n.defined.contains(name) || n.imported.contains_key(name))
    }

    /// The import graph: for each file's module, the modules of the files it imports.
    fn graph(&self) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
        let mut graph = BTreeMap::new();
        for (module, file) in &self.files {
            let mut collector = PathCollector {
                scope: module.clone(),
                paths: Vec::new(),
            };
            let mut ast = file.ast.clone();
            collector.visit_file_mut(&mut ast);
            let mut edges = BTreeSet::new();
            for path in collector.paths {
                let Some(target) = self.resolve(&path, 0) else {
                    continue;
                };
                if target == *module || target.starts_with(module) {
                    continue;
                }
                edges.insert(target);
            }
            graph.insert(module.clone(), edges);
        }
        graph
    }

    /// Every cycle: one line per strongly connected component of more than one file.
    fn cycles(&self) -> Vec<String> {
        let graph = self.graph();
        let mut lines = Vec::new();
        for component in strongly_connected(&graph) {
            if component.len() < 2 {
                continue;
            }
            let cycle = one_cycle(&graph, &component);
            let mut line = cycle
                .iter()
                .map(|m| self.file_name(m))
                .collect::<Vec<_>>()
                .join(" -> ");
            if component.len() > cycle.len() - 1 {
                let others: Vec<String> = component
                    .iter()
                    .filter(|m| !cycle.contains(m))
                    .map(|m| self.file_name(m))
                    .collect();
                if !others.is_empty() {
                    line.push_str(&format!(" (with {})", others.join(", ")));
                }
            }
            lines.push(line);
        }
        lines
    }

    fn file_name(&self, module: &ModPath) -> String {
        self.files
            .get(module)
            .map_or_else(|| module.join("::"), |f| f.name.clone())
    }
}

/// Every `.rs` file under `dir`, sorted.
fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect_rs(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module a file is, from its name under `src/` (`None` for a file outside `src/`).
fn module_of(name: &str) -> Option<ModPath> {
    let rest = name.split_once("src/")?.1.strip_suffix(".rs")?;
    let mut parts: Vec<String> = rest.split('/').map(str::to_string).collect();
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        return Some(Vec::new());
    }
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    Some(parts)
}

/// Collects the names a file's top-level items make under `module`.
fn collect_names(module: &ModPath, items: &[Item], names: &mut Names) {
    for item in items {
        let ident = match item {
            Item::Const(i) => Some(&i.ident),
            Item::Enum(i) => Some(&i.ident),
            Item::Fn(i) => Some(&i.sig.ident),
            Item::Macro(i) => i.ident.as_ref(),
            Item::Static(i) => Some(&i.ident),
            Item::Struct(i) => Some(&i.ident),
            Item::Trait(i) => Some(&i.ident),
            Item::Type(i) => Some(&i.ident),
            Item::Union(i) => Some(&i.ident),
            Item::Mod(i) if i.content.is_some() => Some(&i.ident),
            Item::Use(u) => {
                let mut flat = Vec::new();
                flatten_use(module, &u.tree, Vec::new(), &mut flat);
                for (path, alias) in flat {
                    match alias {
                        Some(alias) if alias != "_" => {
                            names.imported.insert(alias, path);
                        }
                        Some(_) => {}
                        None => names.globs.push(path),
                    }
                }
                None
            }
            _ => None,
        };
        if let Some(ident) = ident {
            names.defined.insert(ident.to_string());
        }
    }
}

/// Flattens a `use` tree into absolute paths, each with the name it binds (`None` for a
/// glob). `prefix` is what the tree's enclosing groups already spelled.
fn flatten_use(
    scope: &ModPath,
    tree: &UseTree,
    prefix: Vec<String>,
    out: &mut Vec<(ModPath, Option<String>)>,
) {
    match tree {
        UseTree::Path(p) => {
            let mut next = prefix;
            next.push(p.ident.to_string());
            flatten_use(scope, &p.tree, next, out);
        }
        UseTree::Name(n) => {
            let name = n.ident.to_string();
            let mut full = prefix;
            let bound = if name == "self" {
                full.last().cloned()
            } else {
                full.push(name.clone());
                Some(name)
            };
            if let (Some(abs), Some(bound)) = (absolute(scope, &full), bound) {
                out.push((abs, Some(bound)));
            }
        }
        UseTree::Rename(r) => {
            let mut full = prefix;
            if r.ident != "self" {
                full.push(r.ident.to_string());
            }
            if let Some(abs) = absolute(scope, &full) {
                out.push((abs, Some(r.rename.to_string())));
            }
        }
        UseTree::Glob(_) => {
            if let Some(abs) = absolute(scope, &prefix) {
                out.push((abs, None));
            }
        }
        UseTree::Group(g) => {
            for tree in &g.items {
                flatten_use(scope, tree, prefix.clone(), out);
            }
        }
    }
}

/// The absolute path (below the crate root) of `path` written in module `scope`. A path that
/// does not start with `crate::`, `super::` or `self::` is taken as relative to the scope (a
/// child module or a name the scope defines or imports); an external crate or prelude name
/// taken so resolves to the scope's own file, which is not an import.
fn absolute(scope: &ModPath, path: &[String]) -> Option<ModPath> {
    let first = path.first()?;
    let (mut base, rest) = match first.as_str() {
        "crate" | "$crate" => (Vec::new(), &path[1..]),
        "self" => (scope.clone(), &path[1..]),
        "super" => (scope.clone(), path),
        _ => (scope.clone(), path),
    };
    let mut rest = rest;
    while rest.first().is_some_and(|s| s == "super") {
        base.pop()?;
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// Collects the absolute paths a file names, in `use` items and in code.
struct PathCollector {
    /// The module the visitor is in (inline modules pushed on the file's module).
    scope: ModPath,
    paths: Vec<ModPath>,
}

/// Whether the attributes include `#[cfg(test)]`.
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .meta
                .require_list()
                .is_ok_and(|list| list.tokens.to_string() == "test")
    })
}

/// The attributes of an item (those of the kinds that can carry `#[cfg(test)]` in practice).
fn item_attrs(item: &Item) -> &[syn::Attribute] {
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

impl VisitMut for PathCollector {
    fn visit_item_mut(&mut self, item: &mut Item) {
        if !is_test_only(item_attrs(item)) {
            syn::visit_mut::visit_item_mut(self, item);
        }
    }

    fn visit_impl_item_fn_mut(&mut self, item: &mut syn::ImplItemFn) {
        if !is_test_only(&item.attrs) {
            syn::visit_mut::visit_impl_item_fn_mut(self, item);
        }
    }

    fn visit_item_mod_mut(&mut self, item: &mut syn::ItemMod) {
        if item.content.is_some() {
            self.scope.push(item.ident.to_string());
            syn::visit_mut::visit_item_mod_mut(self, item);
            self.scope.pop();
        }
    }

    fn visit_item_use_mut(&mut self, item: &mut syn::ItemUse) {
        let mut flat = Vec::new();
        flatten_use(&self.scope, &item.tree, Vec::new(), &mut flat);
        self.paths.extend(flat.into_iter().map(|(path, _)| path));
    }

    fn visit_path_mut(&mut self, path: &mut syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if let Some(abs) = absolute(&self.scope, &segments) {
            self.paths.push(abs);
        }
        syn::visit_mut::visit_path_mut(self, path);
    }
}

/// The strongly connected components of the graph (Tarjan's algorithm), each sorted.
fn strongly_connected(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    struct State<'g> {
        graph: &'g BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'g ModPath, usize>,
        low: BTreeMap<&'g ModPath, usize>,
        stack: Vec<&'g ModPath>,
        on_stack: BTreeSet<&'g ModPath>,
        out: Vec<Vec<ModPath>>,
    }
    fn visit<'g>(s: &mut State<'g>, node: &'g ModPath) {
        let i = s.index.len();
        s.index.insert(node, i);
        s.low.insert(node, i);
        s.stack.push(node);
        s.on_stack.insert(node);
        let graph = s.graph;
        for next in graph.get(node).into_iter().flatten() {
            if !graph.contains_key(next) {
                continue;
            }
            if !s.index.contains_key(next) {
                visit(s, next);
                let low = s.low[node].min(s.low[next]);
                s.low.insert(node, low);
            } else if s.on_stack.contains(next) {
                let low = s.low[node].min(s.index[next]);
                s.low.insert(node, low);
            }
        }
        if s.low[node] == s.index[node] {
            let mut component = Vec::new();
            while let Some(top) = s.stack.pop() {
                s.on_stack.remove(top);
                component.push(top.clone());
                if top == node {
                    break;
                }
            }
            component.sort();
            s.out.push(component);
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for node in graph.keys() {
        if !s.index.contains_key(node) {
            visit(&mut s, node);
        }
    }
    s.out.sort();
    s.out
}

/// A shortest cycle through the component's first node, as a closed list of nodes.
fn one_cycle(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>, component: &[ModPath]) -> Vec<ModPath> {
    let members: BTreeSet<&ModPath> = component.iter().collect();
    let start = &component[0];
    // Breadth-first search inside the component, back to the start.
    let mut came_from: BTreeMap<&ModPath, &ModPath> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for next in graph.get(node).into_iter().flatten() {
            if !members.contains(next) {
                continue;
            }
            if next == start {
                // Walk back from `node` to the start, then read it forwards.
                let mut back = Vec::new();
                let mut at = node;
                while at != start {
                    back.push(at.clone());
                    at = came_from[at];
                }
                let mut cycle = vec![start.clone()];
                cycle.extend(back.into_iter().rev());
                cycle.push(start.clone());
                return cycle;
            }
            if !came_from.contains_key(next) {
                came_from.insert(next, node);
                queue.push_back(next);
            }
        }
    }
    component.to_vec()
}
