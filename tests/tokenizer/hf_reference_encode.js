// node hf_reference_encode.js DIR TEXTS.json: token ids of each text as
// @lenml/tokenizers (a JavaScript port of Hugging Face tokenizers, from
// transformers.js) encodes it with DIR/tokenizer.json and tokenizer_config.json,
// without added BOS/EOS. The reference side of hf_tokenizer_diff.sh.
const { TokenizerLoader } = require('@lenml/tokenizers');
const fs = require('fs');

const dir = process.argv[2];
const tokenizerJSON = JSON.parse(fs.readFileSync(dir + '/tokenizer.json'));
const tokenizerConfig = JSON.parse(fs.readFileSync(dir + '/tokenizer_config.json'));
const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });
const texts = JSON.parse(fs.readFileSync(process.argv[3]));
console.log(JSON.stringify(texts.map((t) => tok.encode(t, { add_special_tokens: false }))));
