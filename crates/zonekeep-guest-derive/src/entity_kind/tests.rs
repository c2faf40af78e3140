//! The derive's tests: the expansion declares every field type in order with its index
//! constant, the kind's name defaults to the struct's in snake_case, and every faulty struct,
//! field or attribute is refused with the error the user sees.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::{expand, snake_case};
use syn::DeriveInput;

/// Every error message `expand` gives for `input`.
fn errors(input: &str) -> Vec<String> {
    let input: DeriveInput = syn::parse_str(input).unwrap();
    match expand(&input) {
        Ok(tokens) => panic!("expected an error, got {tokens}"),
        Err(e) => e.into_iter().map(|e| e.to_string()).collect(),
    }
}

/// The one error `expand` gives for a struct with these fields.
fn error(fields: &str) -> String {
    let all = errors(&format!("struct S {{ {fields} }}"));
    assert_eq!(all.len(), 1, "{all:?}");
    all.into_iter().next().unwrap()
}

/// The expansion for `input`, as text without spaces.
fn expansion(input: &str) -> String {
    let input: DeriveInput = syn::parse_str(input).unwrap();
    let tokens = expand(&input).unwrap();
    tokens.to_string().replace(' ', "")
}

#[test]
fn names_go_to_snake_case() {
    assert_eq!(snake_case("Runner"), "runner");
    assert_eq!(snake_case("PlayerEntity"), "player_entity");
    assert_eq!(snake_case("HTTPServer"), "http_server");
    assert_eq!(snake_case("Bullet2D"), "bullet2d");
    assert_eq!(snake_case("already_snake"), "already_snake");
    assert_eq!(snake_case("A"), "a");
}

#[test]
fn the_expansion_declares_every_type_in_order_with_its_index() {
    let text = expansion(
        "#[entity(name = \"player\")]
        struct Runner {
            #[field(str(max_len = 24))] name: String,
            score: u32,
            it: bool,
            team: i32,
            radius: f32,
            #[field(quant(min = -1, max = 1.5, bits = 8))] health: f32,
            #[field(centered(range = 10.0, bits = 12))] vx: f32,
            #[field(angle(bits = 10))] facing: f32,
            r#type: core::primitive::u32,
            #[field(str(max_len = 255))] full: std::string::String,
        }",
    );
    assert!(text.contains("constNAME:&'staticstr=\"player\";"), "{text}");
    assert!(
        text.contains(
            "::zonekeep_guest::KindDef::new(\"player\").str(\"name\",24u8).uint(\"score\")\
             .bool(\"it\").sint(\"team\").f32(\"radius\").quant(\"health\",-1f32,1.5f32,8u8)\
             .centered(\"vx\",10f32,12u8).angle(\"facing\",10u8).uint(\"type\")\
             .str(\"full\",255u8)"
        ),
        "{text}"
    );
    for (konst, index) in [
        ("FIELD_NAME", 0),
        ("FIELD_SCORE", 1),
        ("FIELD_FACING", 7),
        ("FIELD_TYPE", 8),
    ] {
        assert!(
            text.contains(&format!("pubconst{konst}:u8={index}u8;")),
            "{konst}: {text}"
        );
    }
}

#[test]
fn the_kind_name_defaults_to_the_struct_name_and_a_unit_struct_has_no_fields() {
    let text = expansion("struct BigRock;");
    assert!(text.contains("\"big_rock\""), "{text}");
    assert!(text.contains("let_=(before,ctx,entity);"), "{text}");
    assert!(!text.contains("pubconst"), "{text}");
    let text = expansion("struct r#Crate { x: u32 }");
    assert!(text.contains("\"crate\""), "{text}");
}

#[test]
fn only_structs_with_named_fields_derive() {
    assert_eq!(
        errors("struct T(u32, bool);"),
        [
            "#[derive(EntityKind)] needs a struct with named fields: each field's name is its \
          name in the entity kind"
        ]
    );
    assert_eq!(
        errors("enum E { A }"),
        ["#[derive(EntityKind)] needs a struct with named fields, not an enum"]
    );
    assert_eq!(
        errors("union U { a: u32 }"),
        ["#[derive(EntityKind)] needs a struct with named fields, not a union"]
    );
}

#[test]
fn unsupported_types_are_refused() {
    for ty in [
        "u64",
        "f64",
        "u8",
        "Vec<u8>",
        "&'static str",
        "Option<u32>",
        "std::vec::Vec<u32>",
        "::core::option::Option<Vec<u8>>",
        "[u32; 2]",
    ] {
        assert_eq!(
            error(&format!("x: {ty}")),
            format!(
                "#[derive(EntityKind)] does not support a field of type `{ty}`: an entity \
                 field is a u32, i32, bool, f32 or String"
            ),
        );
    }
}

#[test]
fn a_string_needs_its_max_len_in_range() {
    assert_eq!(
        error("s: String"),
        "a String field needs `#[field(str(max_len = N))]`, N (1..=255) the most bytes its \
         value may have"
    );
    assert_eq!(
        error("#[field(str(max_len = 0))] s: String"),
        "str max_len must be 1..=255 (PROTOCOL.md §5.4), got 0"
    );
    assert_eq!(
        error("#[field(str(max_len = 256))] s: String"),
        "str max_len must be 1..=255 (PROTOCOL.md §5.4), got 256"
    );
    assert_eq!(
        error("#[field(str)] s: String"),
        "`str` needs its parameters: `str(max_len = N)`"
    );
    assert_eq!(
        error("#[field(str())] s: String"),
        "`str` needs `max_len`: `str(max_len = N)`"
    );
    assert_eq!(
        error("#[field(quant(min = 0, max = 1, bits = 8))] s: String"),
        "`quant` does not fit a field of type `String`: a String field takes \
         `str(max_len = N)`"
    );
}

#[test]
fn attributes_must_fit_the_type() {
    assert_eq!(
        error("#[field(quant(min = 0.0, max = 1.0, bits = 8))] n: u32"),
        "`quant` does not fit a field of type `u32`: u32, i32 and bool fields take no \
         #[field(...)] attribute"
    );
    assert_eq!(
        error("#[field(angle(bits = 8))] b: bool"),
        "`angle` does not fit a field of type `bool`: u32, i32 and bool fields take no \
         #[field(...)] attribute"
    );
    assert_eq!(
        error("#[field(str(max_len = 8))] f: f32"),
        "`str` does not fit a field of type `f32`: an f32 field takes `quant(...)`, \
         `centered(...)`, `angle(...)` or no attribute (an exact f32)"
    );
}

#[test]
fn bits_are_checked_as_the_host_checks_them() {
    for (spec, what, range) in [
        ("quant(min = 0, max = 1, bits = {})", "quant bits", (1, 32)),
        ("centered(range = 1, bits = {})", "centered bits", (2, 32)),
        ("angle(bits = {})", "angle bits", (1, 16)),
    ] {
        let (lo, hi) = range;
        for bad in [lo - 1, hi + 1, 1000] {
            let attr = spec.replace("{}", &bad.to_string());
            assert_eq!(
                error(&format!("#[field({attr})] f: f32")),
                format!("{what} must be {lo}..={hi} (PROTOCOL.md §5.4), got {bad}")
            );
        }
        for good in [lo, hi] {
            let attr = spec.replace("{}", &good.to_string());
            expansion(&format!("struct S {{ #[field({attr})] f: f32 }}"));
        }
    }
}

#[test]
fn float_parameters_are_checked_as_the_host_checks_them() {
    assert_eq!(
        error("#[field(quant(min = 1, max = 1, bits = 8))] f: f32"),
        "quant needs min < max (PROTOCOL.md §5.4), got min = 1.0, max = 1.0"
    );
    assert_eq!(
        error("#[field(centered(range = -2.5, bits = 8))] f: f32"),
        "centered range must be > 0 (PROTOCOL.md §5.4), got -2.5"
    );
    assert_eq!(
        error("#[field(centered(range = 1e39, bits = 8))] f: f32"),
        "the number must be a finite f32"
    );
    assert_eq!(
        error("#[field(centered(range = 1.0f64, bits = 8))] f: f32"),
        "expected a number such as `1.5`, `-10` or `0.25f32`"
    );
    assert_eq!(
        error("#[field(centered(range = \"1\", bits = 8))] f: f32"),
        "expected a number such as `1.5`, `-10` or `0.25f32`"
    );
}

#[test]
fn bad_attribute_syntax_is_refused() {
    assert_eq!(
        error("#[field(fixed(bits = 8))] f: f32"),
        "unknown field type `fixed`: expected `str(max_len = N)`, `quant(min = A, max = B, \
         bits = N)`, `centered(range = R, bits = N)` or `angle(bits = N)`"
    );
    assert_eq!(
        error("#[field(angle(bits = 8, step = 2))] f: f32"),
        "unknown parameter `step` of `angle`: expected `angle(bits = N)`"
    );
    assert_eq!(
        error("#[field(angle(bits = 8, bits = 9))] f: f32"),
        "`bits` is given twice"
    );
    assert_eq!(
        error("#[field(quant(min = 0, bits = 8))] f: f32"),
        "`quant` needs `max`: `quant(min = A, max = B, bits = N)`"
    );
    assert_eq!(
        error("#[field(angle(bits = 8), angle(bits = 9))] f: f32"),
        "a field has one wire type: write one of `str(max_len = N)`, `quant(min = A, max = \
         B, bits = N)`, `centered(range = R, bits = N)` or `angle(bits = N)`"
    );
    assert_eq!(
        error("#[field(angle(bits = 8))] #[field(angle(bits = 9))] f: f32"),
        "a field takes one #[field(...)] attribute"
    );
    assert_eq!(
        error("#[field(angle(bits = x))] f: f32"),
        "expected integer literal"
    );
    assert_eq!(
        error("#[field] f: f32"),
        "expected attribute arguments in parentheses: #[field(...)]"
    );
    assert_eq!(
        error("#[entity(name = \"x\")] f: f32"),
        "#[entity(...)] goes on the struct; a field takes #[field(...)]"
    );
    assert_eq!(
        errors("#[entity(title = \"x\")] struct S { f: f32 }"),
        ["unknown #[entity] key: expected `name = \"...\"`"]
    );
    assert_eq!(
        errors("#[entity(name = \"\")] struct S { f: f32 }"),
        ["the kind's name must not be empty"]
    );
    assert_eq!(
        errors("#[entity(name = \"a\", name = \"b\")] struct S { f: f32 }"),
        ["the kind's name is given twice"]
    );
    assert_eq!(
        errors("#[field(angle(bits = 8))] struct S { f: f32 }"),
        ["#[field(...)] goes on a field; the struct takes #[entity(name = \"...\")]"]
    );
}

#[test]
fn every_faulty_field_is_reported_at_once() {
    assert_eq!(
        errors("struct S { a: u64, ok: u32, s: String, #[field(angle(bits = 0))] f: f32 }").len(),
        3
    );
}

#[test]
fn fields_whose_constants_collide_are_refused() {
    assert_eq!(
        error("a: u32, A: u32"),
        "two fields would both have the index constant `FIELD_A`"
    );
}

#[test]
fn more_than_255_fields_are_refused() {
    let fields = |n: usize| {
        (0..n)
            .map(|i| format!("f{i}: u32"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let text = expansion(&format!("struct S {{ {} }}", fields(255)));
    assert!(text.contains("pubconstFIELD_F254:u8=254u8;"));
    assert_eq!(
        error(&fields(256)),
        "an entity kind has at most 255 fields (DECLARE_KIND counts them in a u8); this \
         struct has 256"
    );
}
