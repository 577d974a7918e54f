"""GE graph files: the ge.proto ModelDef (.air, .pbtxt) written and read back with every node verified, and GE's ONNX-format graph dump that Netron opens."""
