// Opens a model file with Netron's own readers (the `netron` package's view.js ModelFactoryService, as its app does)
// under Node, and prints what it read as JSON: the format and every node name of every graph, nested graphs
// (attributes of type graph) included. Usage: node netron_open.mjs NETRON_DIR MODEL_FILE
import * as fs from 'fs';
import * as path from 'path';
import { pathToFileURL } from 'url';

const [netronDir, file] = process.argv.slice(2);
const view = await import(pathToFileURL(path.join(netronDir, 'view.js')));
const base = await import(pathToFileURL(path.join(netronDir, 'base.js')));

const host = {
    async require(id) { return import(pathToFileURL(path.join(netronDir, `${id}.js`))); },
    async asset(name) { return fs.readFileSync(path.join(netronDir, name), 'utf-8'); },
    environment() { return null; },
    event() {},
    exception(error) { throw error; },
};

class FileContext {
    constructor(stream) { this._stream = stream; }
    get identifier() { return path.basename(file); }
    get stream() { return this._stream; }
    get entries() { return new Map(); }
    async asset(name) { return host.asset(name); }
    async fetch() { throw new Error('File not found.'); }
    async require(id) { return host.require(id); }
    error(error) { throw error; }
}

const names = (graph, out) => {
    for (const node of graph.nodes || []) {
        out.push(node.name);
        for (const attribute of node.attributes || []) {
            if (attribute.type === 'graph' && attribute.value) {
                names(attribute.value, out);
            }
        }
    }
    return out;
};

const stream = new base.BinaryStream(new Uint8Array(fs.readFileSync(file)));
const model = await new view.ModelFactoryService(host).open(new FileContext(stream));
const graphs = model.modules || model.graphs || [];
process.stdout.write(JSON.stringify({ format: model.format, nodes: graphs.flatMap((g) => names(g, [])) }));
