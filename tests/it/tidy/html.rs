//! HTML only from templates: in the product's sources, no string literal outside a `maud`
//! `html!` template holds an HTML tag, and `PreEscaped` (which puts text into a page as it is)
//! appears only in the web kit's page, for its constant stylesheet. So no page can put a value
//! into HTML without escaping it, whatever page comes next.

use std::path::Path;

use syn::visit::Visit;

/// Elements a page is made of. (`<` before other words is prose or a type: `Bearer <token>`,
/// `Page<T>`.)
const ELEMENTS: &[&str] = &[
    "a", "b", "body", "br", "button", "caption", "code", "dd", "div", "dl", "dt", "em", "form",
    "h1", "h2", "h3", "h4", "head", "header", "html", "i", "iframe", "img", "input", "label", "li",
    "link", "main", "meta", "nav", "ol", "option", "p", "pre", "script", "section", "select",
    "small", "span", "strong", "style", "svg", "table", "tbody", "td", "textarea", "th", "thead",
    "title", "tr", "ul",
];

/// Whether `text` holds a tag: a closing tag, a `<!` declaration, or an element's opening tag.
fn holds_a_tag(text: &str) -> bool {
    text.match_indices('<').any(|(at, _)| {
        let rest = &text[at + 1..];
        if rest.starts_with('/') || rest.starts_with('!') {
            return rest.len() > 1;
        }
        let name: String = rest
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect::<String>()
            .to_ascii_lowercase();
        let after = rest[name.len()..].chars().next();
        ELEMENTS.contains(&name.as_str()) && matches!(after, Some('>' | ' ' | '/' | '\n' | '\t'))
    })
}

#[derive(Default)]
struct Finder {
    found: Vec<String>,
}

impl Finder {
    fn tokens(&mut self, tokens: proc_macro2::TokenStream) {
        for tree in tokens {
            match tree {
                proc_macro2::TokenTree::Group(g) => self.tokens(g.stream()),
                proc_macro2::TokenTree::Literal(lit) => {
                    if let Ok(syn::Lit::Str(s)) = syn::parse_str::<syn::Lit>(&lit.to_string()) {
                        self.literal(&s);
                    }
                }
                proc_macro2::TokenTree::Ident(i) if i == "PreEscaped" => {
                    self.found.push("PreEscaped".into());
                }
                _ => {}
            }
        }
    }

    fn literal(&mut self, s: &syn::LitStr) {
        if holds_a_tag(&s.value()) {
            self.found.push(format!("{:?}", s.value()));
        }
    }
}

impl<'ast> Visit<'ast> for Finder {
    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {
        // Doc comments may show markup; they are not pages.
    }
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        // A file's own tests feed pages hostile markup on purpose.
        let is_test = m.attrs.iter().any(|a| {
            a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test")
        });
        if !is_test {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_lit_str(&mut self, s: &'ast syn::LitStr) {
        self.literal(s);
    }
    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.segments.iter().any(|s| s.ident == "PreEscaped") {
            self.found.push("PreEscaped".into());
        }
        syn::visit::visit_path(self, p);
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        // A template's literals are text that maud escapes (or its element names).
        if m.path.segments.last().is_some_and(|s| s.ident == "html") {
            return;
        }
        self.tokens(m.tokens.clone());
    }
}

/// What in `file` builds HTML outside a template.
fn html_outside_templates(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let Ok(ast) = syn::parse_file(&text) else {
        return vec!["does not parse".into()];
    };
    let mut finder = Finder::default();
    finder.visit_file(&ast);
    finder.found
}

/// The one file allowed `PreEscaped`: the kit's page, for the stylesheet constants.
const KIT: &str = "crates/front/src/web/page.rs";

#[test]
fn html_is_built_only_by_templates() {
    let root = super::root();
    let mut files = super::sources();
    for dir in ["src", "wasm/worker/src", "wasm/spin/src", "wasm/host/src"] {
        super::rust_files(&root.join(dir), &mut files);
    }
    let mut failures = Vec::new();
    for file in &files {
        let rel = file
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let mut found = html_outside_templates(file);
        if rel == KIT {
            found.retain(|f| !f.starts_with("PreEscaped"));
        }
        failures.extend(found.into_iter().map(|f| format!("{rel}: {f}")));
    }
    assert!(
        failures.is_empty(),
        "HTML built outside a maud template (write it in `html!`, where every value is escaped):\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_html_check_sees_tags_in_every_kind_of_literal() {
    let dir = std::env::temp_dir().join(format!("lore-tidy-html-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("page.rs");
    std::fs::write(
        &file,
        r##"
        /// Docs may say <b>this</b>.
        fn a(name: &str) -> String { format!("<p>{name}</p>") }
        fn b() -> &'static str { "</div>" }
        fn c(out: &mut String) { out.push_str(r#"<!doctype html>"#) }
        fn d() -> maud::Markup { maud::html! { p { "<script> is text here" } } }
        fn e(x: &str) -> maud::Markup { maud::PreEscaped(x.to_string()) }
        fn f() -> &'static str { "a < b and 1<2, Bearer <token>, Page<T>, </" }
        #[cfg(test)]
        mod tests { fn hostile() -> &'static str { "<script>" } }
        "##,
    )
    .unwrap();
    let found = html_outside_templates(&file);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found.len(), 4, "{found:#?}");
}
