"""graph_ir.Session, which runs GE graphs on graph_ir's executors: its plans (order, memory, snapshots, aliasing) and the plans of a template graph by the call's input shapes."""
