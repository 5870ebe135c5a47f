//! The import graph among one crate's files, read with a Rust parser (`syn`). A crate is read
//! from its root file through its `mod` declarations (`#[path]` honoured, `#[cfg(test)]`
//! modules and items left out), so every file the compiler would read is read, whatever its
//! folder. A path counts toward the file that defines what it names, seen through files that
//! only pass the name on (`pub use`, globs included); a path into another crate is no edge.
//! Paths are taken from `use` trees, from code and types, and from the token trees of macro
//! calls and `macro_rules!` bodies (`$crate::…`).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// A module path from the crate root (`[]` is the root).
pub type ModPath = Vec<String>;

/// file -> the files whose names it takes, with the names.
pub type Graph = BTreeMap<PathBuf, BTreeMap<PathBuf, BTreeSet<String>>>;

/// What one module (a file, or an inline `mod` inside one) holds.
#[derive(Default)]
struct Module {
    file: PathBuf,
    /// Names of the items it defines (child modules too).
    defined: BTreeSet<String>,
    /// Names it passes on (`pub use`, any visibility but private): name -> the path it names.
    passed_on: BTreeMap<String, ModPath>,
    /// Modules it passes on whole (`pub use x::*`).
    globs: Vec<ModPath>,
    /// Every name a `use` brings in, public or not: name -> the path it names.
    aliases: BTreeMap<String, ModPath>,
    /// What its private `use`s name (a `pub use` only passes a name on: no import of its own).
    imports: Vec<ModPath>,
    /// Paths its code names, as written.
    paths: Vec<ModPath>,
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// Reads a crate from its root file: every module, by module path.
struct Reader {
    modules: BTreeMap<ModPath, Module>,
    /// The files of `#[cfg(test)]` modules, which are not read.
    test_only: BTreeSet<PathBuf>,
    errors: Vec<String>,
}

/// The file a `mod` declaration without a body names, and the folder of its own children.
fn module_file(file: &Path, dir: &Path, m: &syn::ItemMod) -> (PathBuf, PathBuf) {
    let child_dir = dir.join(m.ident.to_string());
    if let Some(p) = path_attr(&m.attrs) {
        let target = file.parent().unwrap().join(p);
        let target_dir = target.parent().unwrap().to_path_buf();
        return (target, target_dir);
    }
    let flat = dir.join(format!("{}.rs", m.ident));
    let nested = child_dir.join("mod.rs");
    (if flat.exists() { flat } else { nested }, child_dir)
}

impl Reader {
    /// Reads `file` as module `path`; `dir` is where its child modules' files are.
    fn file(&mut self, file: &Path, path: ModPath, dir: PathBuf) {
        let text = match fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => return self.errors.push(format!("{}: {e}", file.display())),
        };
        let ast = match syn::parse_file(&text) {
            Ok(a) => a,
            Err(e) => return self.errors.push(format!("{}: {e}", file.display())),
        };
        self.items(file, path, &dir, &ast.items);
    }

    fn items(&mut self, file: &Path, path: ModPath, dir: &Path, items: &[syn::Item]) {
        self.modules.entry(path.clone()).or_default().file = file.to_path_buf();
        let mut collector = Collector::default();
        for item in items {
            if is_test_only(item_attrs(item)) {
                if let syn::Item::Mod(m) = item
                    && m.content.is_none()
                {
                    self.test_only.insert(module_file(file, dir, m).0);
                }
                continue;
            }
            if let Some(name) = defined_name(item) {
                self.module(&path).defined.insert(name);
            }
            match item {
                syn::Item::Mod(m) => {
                    let mut child = path.clone();
                    child.push(m.ident.to_string());
                    if let Some((_, inner)) = &m.content {
                        self.items(file, child, &dir.join(m.ident.to_string()), inner);
                    } else {
                        let (target, target_dir) = module_file(file, dir, m);
                        self.file(&target, child, target_dir);
                    }
                }
                syn::Item::Use(u) => {
                    let public = !matches!(u.vis, syn::Visibility::Inherited);
                    let mut leaves = Vec::new();
                    use_leaves(&u.tree, Vec::new(), &mut leaves);
                    let module = self.module(&path);
                    for (name, target) in leaves {
                        match name {
                            Some(name) => {
                                if public {
                                    module.passed_on.insert(name.clone(), target.clone());
                                } else {
                                    module.imports.push(target.clone());
                                }
                                module.aliases.insert(name, target);
                            }
                            None if public => module.globs.push(target),
                            None => {}
                        }
                    }
                }
                other => collector.visit_item(other),
            }
        }
        self.module(&path).paths.extend(collector.paths);
    }

    fn module(&mut self, path: &ModPath) -> &mut Module {
        self.modules.entry(path.clone()).or_default()
    }
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

fn defined_name(item: &syn::Item) -> Option<String> {
    let ident = match item {
        syn::Item::Const(i) => &i.ident,
        syn::Item::Enum(i) => &i.ident,
        syn::Item::Fn(i) => &i.sig.ident,
        syn::Item::Macro(i) => i.ident.as_ref()?,
        syn::Item::Mod(i) => &i.ident,
        syn::Item::Static(i) => &i.ident,
        syn::Item::Struct(i) => &i.ident,
        syn::Item::Trait(i) => &i.ident,
        syn::Item::TraitAlias(i) => &i.ident,
        syn::Item::Type(i) => &i.ident,
        syn::Item::Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}

/// Flattens a use tree into (name it binds, path it names); a glob binds no name.
fn use_leaves(tree: &syn::UseTree, prefix: ModPath, out: &mut Vec<(Option<String>, ModPath)>) {
    match tree {
        syn::UseTree::Path(p) => {
            let mut prefix = prefix;
            prefix.push(p.ident.to_string());
            use_leaves(&p.tree, prefix, out);
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            if name == "self" {
                let last = prefix.last().cloned();
                out.push((last, prefix));
            } else {
                let mut path = prefix;
                path.push(name.clone());
                out.push((Some(name), path));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix;
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            let name = r.rename.to_string();
            out.push(((name != "_").then_some(name), path));
        }
        syn::UseTree::Glob(_) => out.push((None, prefix)),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_leaves(t, prefix.clone(), out);
            }
        }
    }
}

/// Every path the code of one module names, test-only items left out; inline modules are
/// read as modules of their own, not here.
#[derive(Default)]
struct Collector {
    paths: Vec<ModPath>,
}

impl<'a> Visit<'a> for Collector {
    fn visit_item(&mut self, item: &'a syn::Item) {
        if is_test_only(item_attrs(item)) {
            return;
        }
        syn::visit::visit_item(self, item);
    }
    fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
    fn visit_path(&mut self, path: &'a syn::Path) {
        self.paths
            .push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, path);
    }
    fn visit_visibility(&mut self, _: &'a syn::Visibility) {
        // `pub(crate)`, `pub(super)`, `pub(in path)` name where an item is seen, not an import.
    }
    fn visit_item_use(&mut self, u: &'a syn::ItemUse) {
        // A `use` inside a function's body: what it names counts toward this module.
        let mut leaves = Vec::new();
        use_leaves(&u.tree, Vec::new(), &mut leaves);
        self.paths.extend(leaves.into_iter().map(|(_, path)| path));
    }
    fn visit_macro(&mut self, mac: &'a syn::Macro) {
        self.visit_path(&mac.path);
        token_paths(mac.tokens.clone(), &mut self.paths);
    }
}

/// The paths written in a macro's tokens: identifiers joined by `::`, `$crate` read as `crate`.
fn token_paths(tokens: TokenStream, out: &mut Vec<ModPath>) {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < trees.len() {
        match &trees[i] {
            TokenTree::Group(g) => token_paths(g.stream(), out),
            TokenTree::Ident(id) => {
                let dollar =
                    i > 0 && matches!(&trees[i - 1], TokenTree::Punct(p) if p.as_char() == '$');
                let mut path = vec![if dollar && id == "crate" {
                    "crate".to_string()
                } else {
                    id.to_string()
                }];
                // `::` is two `:` puncts.
                while let (
                    Some(TokenTree::Punct(a)),
                    Some(TokenTree::Punct(b)),
                    Some(TokenTree::Ident(next)),
                ) = (trees.get(i + 1), trees.get(i + 2), trees.get(i + 3))
                {
                    if a.as_char() != ':' || b.as_char() != ':' {
                        break;
                    }
                    path.push(next.to_string());
                    i += 3;
                }
                out.push(path);
            }
            _ => {}
        }
        i += 1;
    }
}

/// A crate's files, read from its root.
pub struct Crate {
    modules: BTreeMap<ModPath, Module>,
    test_only: BTreeSet<PathBuf>,
}

impl Crate {
    /// Reads the crate whose root file is `root` (a `lib.rs`, `main.rs` or any target's file).
    pub fn read(root: &Path) -> Result<Self, Vec<String>> {
        let mut reader = Reader {
            modules: BTreeMap::new(),
            test_only: BTreeSet::new(),
            errors: Vec::new(),
        };
        reader.file(root, Vec::new(), root.parent().unwrap().to_path_buf());
        if reader.errors.is_empty() {
            Ok(Self {
                modules: reader.modules,
                test_only: reader.test_only,
            })
        } else {
            Err(reader.errors)
        }
    }

    /// The files the crate's modules live in.
    pub fn files(&self) -> BTreeSet<PathBuf> {
        self.modules.values().map(|m| m.file.clone()).collect()
    }

    /// The files of its `#[cfg(test)]` modules (not read).
    pub fn test_files(&self) -> &BTreeSet<PathBuf> {
        &self.test_only
    }

    /// A path as written in module `here`, from the crate root; `None` if it is another crate's
    /// or a local name.
    fn absolute(&self, here: &ModPath, path: &ModPath) -> Option<ModPath> {
        let (first, rest) = path.split_first()?;
        let mut base = match first.as_str() {
            "crate" => Vec::new(),
            "self" => here.clone(),
            "super" => {
                let mut base = here.clone();
                base.pop()?;
                let mut rest = rest;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                return Some(base);
            }
            _ => {
                let mut child = here.clone();
                child.push(first.clone());
                if self.modules.contains_key(&child) {
                    child
                } else {
                    let alias = self.modules.get(here)?.aliases.get(first)?;
                    if alias.first().is_some_and(|s| s == first) {
                        return None; // `use serde::Serialize;`: another crate's name
                    }
                    self.absolute(here, alias)?
                }
            }
        };
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The file that defines what an absolute path names, if it is this crate's.
    fn resolve(&self, path: &ModPath, depth: u32) -> Option<PathBuf> {
        if depth > 16 {
            return None;
        }
        let n = (0..=path.len())
            .rev()
            .find(|n| self.modules.contains_key(&path[..*n]))?;
        let module = &self.modules[&path[..n]];
        let Some(next) = path.get(n) else {
            return Some(module.file.clone());
        };
        if module.defined.contains(next) {
            return Some(module.file.clone());
        }
        if let Some(from) = module.passed_on.get(next) {
            let here = path[..n].to_vec();
            let mut again = self.absolute(&here, from)?;
            again.extend(path[n + 1..].iter().cloned());
            return self.resolve(&again, depth + 1);
        }
        for glob in &module.globs {
            let here = path[..n].to_vec();
            if let Some(mut again) = self.absolute(&here, glob) {
                again.extend(path[n..].iter().cloned());
                if let Some(found) = self.resolve(&again, depth + 1) {
                    return Some(found);
                }
            }
        }
        (n > 0).then(|| module.file.clone())
    }

    /// The import graph among the crate's files.
    pub fn graph(&self) -> Graph {
        let mut graph: Graph = self
            .files()
            .into_iter()
            .map(|f| (f, BTreeMap::new()))
            .collect();
        for (here, module) in &self.modules {
            // A `use` of an item counts; a `use` of a module counts where its items are named.
            let written = module.paths.iter().chain(&module.imports);
            for path in written {
                let Some(absolute) = self.absolute(here, path) else {
                    continue;
                };
                if self.modules.contains_key(&absolute) {
                    continue;
                }
                if let Some(target) = self.resolve(&absolute, 0)
                    && target != module.file
                {
                    let name = absolute.last().cloned().unwrap_or_default();
                    graph
                        .get_mut(&module.file)
                        .unwrap()
                        .entry(target)
                        .or_default()
                        .insert(name);
                }
            }
        }
        graph
    }
}

/// The sets of files that lie on a circle of imports (strongly connected components of two or
/// more).
pub fn circles(graph: &Graph) -> Vec<BTreeSet<PathBuf>> {
    let reach = |from: &PathBuf| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(f) = stack.pop() {
            for t in graph.get(&f).into_iter().flat_map(BTreeMap::keys) {
                if seen.insert(t.clone()) {
                    stack.push(t.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&PathBuf, BTreeSet<PathBuf>> =
        graph.keys().map(|f| (f, reach(f))).collect();
    let mut out: Vec<BTreeSet<PathBuf>> = Vec::new();
    for (f, from_f) in &reaches {
        if !from_f.contains(*f) || out.iter().any(|c| c.contains(*f)) {
            continue;
        }
        let circle: BTreeSet<PathBuf> = from_f
            .iter()
            .filter(|g| reaches.get(g).is_some_and(|r| r.contains(*f)))
            .cloned()
            .collect();
        out.push(circle);
    }
    out
}
