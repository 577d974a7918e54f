"""The GE graph IR: dtypes, the op registry (each GE op as CANN's REG_OP declares it), nodes and tensor descs, the verifier and output rules, and Graph with its subgraphs and builders."""
