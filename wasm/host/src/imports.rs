//! What a component may import: the WASI interfaces wasmtime provides (0.2 and 0.3), and the
//! Spin interfaces this host implements. Anything else is refused before serving, naming it.

use wasmtime::Engine;
use wasmtime::component::Component;
use wasmtime::{Result, bail};

/// Import prefixes this host provides.
pub const ALLOWED: &[&str] = &[
    "wasi:cli/",
    "wasi:clocks/",
    "wasi:filesystem/",
    "wasi:io/",
    "wasi:random/",
    "wasi:sockets/",
    "wasi:http/types@0.3.",
    "wasi:http/client@0.3.",
    "spin:key-value/key-value@3.0.0",
    "spin:sqlite/sqlite@3.1.0",
    "spin:variables/variables@3.0.0",
    "fermyon:spin/llm@2.0.0",
];

/// The component's imports that this host does not provide.
pub fn unsupported(engine: &Engine, component: &Component) -> Vec<String> {
    component
        .component_type()
        .imports(engine)
        .map(|(name, _)| name.to_string())
        .filter(|name| !ALLOWED.iter().any(|p| name.starts_with(p)))
        .collect()
}

pub fn check(engine: &Engine, component: &Component) -> Result<()> {
    let bad = unsupported(engine, component);
    if !bad.is_empty() {
        bail!(
            "the component imports {} that this host does not provide: {}\n\
             provided: {}",
            if bad.len() == 1 {
                "an interface"
            } else {
                "interfaces"
            },
            bad.join(", "),
            ALLOWED.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn component(engine: &Engine, wat: &str) -> Component {
        Component::new(engine, wat).expect("a component in the text format")
    }

    #[test]
    fn a_component_importing_an_unprovided_interface_is_refused() {
        let engine = crate::engine().unwrap();
        let c = component(
            &engine,
            r#"(component
                (import "wasi:clocks/wall-clock@0.2.6" (instance))
                (import "fermyon:spin/redis@2.0.0" (instance))
                (import "spin:key-value/key-value@2.0.0" (instance))
                (import "spin:mqtt/mqtt@3.0.0" (instance)))"#,
        );
        assert_eq!(
            unsupported(&engine, &c),
            [
                "fermyon:spin/redis@2.0.0",
                "spin:key-value/key-value@2.0.0",
                "spin:mqtt/mqtt@3.0.0"
            ]
        );
        let message = check(&engine, &c).unwrap_err().to_string();
        assert!(message.contains("fermyon:spin/redis@2.0.0"), "{message}");
    }

    #[test]
    fn provided_interfaces_pass() {
        let engine = crate::engine().unwrap();
        let c = component(
            &engine,
            r#"(component
                (import "wasi:http/types@0.3.0" (instance))
                (import "spin:key-value/key-value@3.0.0" (instance))
                (import "spin:sqlite/sqlite@3.1.0" (instance))
                (import "spin:variables/variables@3.0.0" (instance))
                (import "fermyon:spin/llm@2.0.0" (instance)))"#,
        );
        assert!(unsupported(&engine, &c).is_empty());
        check(&engine, &c).unwrap();
    }
}
