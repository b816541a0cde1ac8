"""The compiler: HLO IR, lowering from jaxprs, verifier and optimization passes."""
