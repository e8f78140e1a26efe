// RUN: zb-opt %s --zb-narrow-stash=dtype=f8 -verify-diagnostics

// Only bf16 is known.
// expected-error @+1 {{--zb-narrow-stash: unknown dtype 'f8'; known: bf16}}
module {
}
