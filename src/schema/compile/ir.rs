//! The compiler's typed IR: [`Expr`]essions over typed [`Core`]s, and the per-type
//! constraints before finalisation ([`StrC`], [`ArrC`], [`ObjC`], …).

use super::{CoreId, DfaId, ExprId};
use crate::schema::number::NumCore;

/// Value types, as bits.
pub(crate) const T_NULL: u8 = 1;
pub(crate) const T_BOOL: u8 = 2;
pub(crate) const T_INT: u8 = 4;
pub(crate) const T_NUM: u8 = 8;
pub(crate) const T_STR: u8 = 16;
pub(crate) const T_ARR: u8 = 32;
pub(crate) const T_OBJ: u8 = 64;
pub(crate) const T_ALL: u8 = 127;

/// String constraint before finalisation.
#[derive(Clone, Debug, Default)]
pub(crate) struct StrC {
    /// Automaton (index into the DFA table); `None` = any string.
    pub dfa: Option<DfaId>,
    pub min: u32,
    pub max: u32,
}

/// A group of key rules from one source schema (`properties`, `patternProperties`,
/// `additionalProperties` of one subschema).
#[derive(Clone, Debug)]
pub(crate) struct KeyGroup {
    pub props: Vec<(String, ExprId)>,
    /// (pattern automaton, schema)
    pub patterns: Vec<(DfaId, ExprId)>,
    pub additional: ExprId,
    /// The group's names and patterns produce evaluation annotations (they come from a
    /// schema's own `properties`/`patternProperties`, not from `const`, `not`, …).
    pub annot: bool,
    /// Every key is evaluated (`additionalProperties` or `unevaluatedProperties` present).
    pub annot_all: bool,
    /// What the group says of undeclared keys, for [`SchemaOptions::closed_objects`]
    /// (see [`Close`]).
    ///
    /// [`SchemaOptions::closed_objects`]: crate::schema::SchemaOptions::closed_objects
    pub close: Close,
}

/// How a key group votes on closing its object under
/// [`SchemaOptions::closed_objects`](crate::schema::SchemaOptions::closed_objects): an object
/// core is closed when one of its groups is [`Close::Silent`] and none is [`Close::Open`].
/// Decided on the final (merged) core when the runtime program is laid out, never while the
/// compiler reasons about languages (disjointness, covers, `not` over literals): those see the
/// schema as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Close {
    /// No opinion: groups built by the compiler (type cores, literals, negations) and schema
    /// objects that declare no keys or say `additionalProperties: false`.
    Neutral,
    /// A schema object that declares `properties` or `patternProperties` and says nothing of
    /// other keys (neither `additionalProperties` nor `unevaluatedProperties`).
    Silent,
    /// Undeclared keys explicitly allowed: `additionalProperties` other than `false`, an
    /// applied `unevaluatedProperties`, or an item of a `uniqueItems` array (whose uniqueness
    /// the runtime decides exactly only for objects open to new keys).
    Open,
}

/// Object constraint before finalisation.
#[derive(Clone, Debug)]
pub(crate) struct ObjC {
    pub groups: Vec<KeyGroup>,
    pub required: Vec<String>,
    pub min: u32,
    pub max: u32,
    pub deps: Vec<(String, Vec<String>)>,
    pub names: Option<DfaId>,
}

impl ObjC {
    /// Objects whose keys in `props` match their schemas and whose other keys match
    /// `additional`, with these `required` keys and at least `min` members (no annotations, no
    /// other object keyword).
    pub(crate) fn new(
        props: Vec<(String, ExprId)>,
        additional: ExprId,
        required: Vec<String>,
        min: u32,
    ) -> ObjC {
        ObjC {
            groups: vec![KeyGroup {
                props,
                patterns: Vec::new(),
                additional,
                annot: false,
                annot_all: false,
                close: Close::Neutral,
            }],
            required,
            min,
            max: u32::MAX,
            deps: Vec::new(),
            names: None,
        }
    }
}

/// Array constraint.
#[derive(Clone, Debug)]
pub(crate) struct ArrC {
    pub prefix: Vec<ExprId>,
    pub items: ExprId,
    pub min: u32,
    pub max: u32,
    pub contains: Option<ContainsC>,
    /// `uniqueItems: true`, with the pointer of the schema that said so.
    pub unique: Option<String>,
    /// Item positions evaluated by `prefixItems` (or array-form `items`).
    pub annot_len: u32,
    /// Every item is evaluated (`items`, `additionalItems` or `unevaluatedItems` present).
    pub annot_all: bool,
}

impl ArrC {
    /// Items and length bounds only: no `contains`, no `uniqueItems`, no annotations.
    pub(crate) fn new(prefix: Vec<ExprId>, items: ExprId, min: u32, max: u32) -> ArrC {
        ArrC {
            prefix,
            items,
            min,
            max,
            contains: None,
            unique: None,
            annot_len: 0,
            annot_all: false,
        }
    }
}

/// `contains` with `minContains`/`maxContains`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ContainsC {
    /// The `contains` schema.
    pub schema: ExprId,
    /// Its negation, when [`Compiler::negate`] can build it (required when `max` is finite).
    pub neg: Option<ExprId>,
    pub min: u32,
    pub max: u32,
}

/// A typed alternative: the runtime's unit of progress.
#[derive(Clone, Debug)]
pub(crate) enum Core {
    Null,
    /// Bit 0: `false` allowed, bit 1: `true` allowed.
    Bool(u8),
    Number(NumCore),
    String(StrC),
    Array(ArrC),
    Object(Box<ObjC>),
}

impl Core {
    pub(super) fn type_bit(&self) -> u8 {
        match self {
            Core::Null => T_NULL,
            Core::Bool(_) => T_BOOL,
            Core::Number(_) => T_NUM,
            Core::String(_) => T_STR,
            Core::Array(_) => T_ARR,
            Core::Object(_) => T_OBJ,
        }
    }
}

/// A subschema expression.
#[derive(Clone, Debug)]
pub(crate) enum Expr {
    /// Filled in later (a `$ref` target being compiled).
    Pending,
    /// A union of cores given directly.
    Cores(Vec<CoreId>),
    And(Vec<ExprId>),
    Or(Vec<ExprId>),
    /// `oneOf`: normalised as a union once the branches are shown disjoint, or once each
    /// overlap is a core another branch covers ([`Compiler::one_of_by_cover`]), otherwise as
    /// `∨ᵢ (branchᵢ ∧ ∧_{j≠i} ¬branchⱼ)` when every branch can be negated
    /// ([`Compiler::one_of_negations`], built on first need).
    OneOf(Vec<ExprId>, String),
    /// `unevaluatedProperties` / `unevaluatedItems` over the rest of a schema object (`base`):
    /// decided per normal-form alternative, whose evaluated keys and items are static when
    /// every in-place applicator below is exclusive (see [`Compiler::check_exclusive`]).
    Uneval {
        base: ExprId,
        props: Option<ExprId>,
        items: Option<ExprId>,
        ptr: String,
    },
    /// The expression's cores without their evaluation annotations: a positive schema met
    /// inside a `not` (`not: {not: S}`, the pairs of a negated `oneOf`, a negated `if`),
    /// whose annotations the specification drops.
    NoAnnot(ExprId),
    /// `not` over the schema `pos` whose complement has no exact form (`reason` says why):
    /// decided only inside a conjunction whose other parts leave a finite set of literals
    /// (`enum`/`const` siblings), each kept iff `pos` rejects it; an error anywhere else.
    Not {
        pos: ExprId,
        ptr: String,
        reason: String,
    },
}
