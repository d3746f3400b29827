// Package detgen makes a Helm chart's randomness a function of a secret
// seed, so that rendering the same chart with the same values and seed gives
// the same bytes, and any change of what a generator is given gives a new
// value.
//
// # Design
//
// Helm 4 lets an embedder replace template functions
// (action.Configuration.CustomTemplateFuncs, copied over Helm's own map
// last). Funcs returns replacements for every source of randomness in Helm
// 4.3.1's function map (sprig v3.3.0 and Helm's own): randAlphaNum,
// randAlpha, randNumeric, randAscii, randBytes, randInt, uuidv4, shuffle,
// genPrivateKey, genCA(WithKey), genSelfSignedCert(WithKey),
// genSignedCert(WithKey), buildCustomCert (for its return type), bcrypt,
// htpasswd, encryptAES; keys and values, which sprig returns in Go's
// randomised map order, come back sorted. derivePassword and decryptAES are
// deterministic already and stay Helm's. Each replacement takes the same
// parameters, returns the same form (alphabets, PEM block types, key types
// and sizes, certificate fields, bcrypt cost, the encryptAES format that
// sprig's decryptAES reads) and fails the same way as the original, except
// where noted on the function.
//
// A template function cannot see who called it, so Rewrite parses each
// template file (text/template/parse) and gives every call of a replaced
// function its site as a first argument: `randAlphaNum 16` becomes
// `_dp_randAlphaNum "v2|…" 16`. The site is the template the call is
// written in (the file or the define), a hash of the call's source line
// (trimmed) and the ranges around it. Rewrite also marks what makes a
// call's context: each include, tpl and template action pushes a frame
// while it runs (a tpl's text is rewritten as it runs, as a file is), each
// range's body starts by telling the current key, and each non-partial
// file starts with a begin marker. The Generator keeps that stack (see
// frames.go), and a call's identity is: the file being rendered, the chain
// of frames above it (each by its site and the keys of the ranges around
// it), the call's site and range keys, and the number of equal calls before
// it in the file's execution. A range key is a map's key, or a list entry
// itself when it is a scalar, or its name, id or key field; only else its
// position. An include of a whole file starts a new root, so the file's
// calls take the identities they take when Helm renders the file. Line
// numbers are not part of an identity: adding a line above a call leaves
// its value. A call at a file's own level outside any range is encoded as
// before contexts existed (site version 1), so such values did not change
// with them.
//
// Every value is derived with HKDF-SHA256 from the seed, under a versioned
// label, with the canonical length-prefixed encoding of the release name and
// namespace, the purpose, the function, the identity and the arguments as
// info. Strings, bytes and UUIDs are drawn from ChaCha8 (math/rand/v2,
// cryptographically strong) keyed with 32 derived bytes, by rejection
// sampling, so no character is likelier than another. RSA and ECDSA keys are
// c2sp.org/det-keygen's (filippo.io/keygen), Ed25519 keys come from a derived
// seed, DSA keys from crypto/dsa's procedure over a derived stream. bcrypt
// takes a derived salt; encryptAES a derived IV (from the call, the key and
// the plaintext). Signatures need no randomness: RSA PKCS #1 v1.5 and Ed25519
// are deterministic and ECDSA is signed by RFC 6979.
//
// A render derives each RSA and DSA key once, however often its call runs,
// and may keep it in a KeyCache for the next (SetKeyCache): sealed with
// AES-256-GCM under a key derived from the seed and the call, the call as
// associated data, under a MAC of the call; an entry is used only when it
// opens and its key checks out, else the key is derived again. The cache
// changes how fast a value comes, never what it is.
//
// A key depends on its call, never on time. A certificate is valid for
// exactly the days asked from the start of the current re-issue window:
// windows are 2/3 of the validity long, aligned to the Unix epoch plus an
// offset derived from the call, so the same certificate is rendered until
// the next window starts (Certificate.ReissueAt), while a third of its
// validity is left, and a chart's certificates do not all roll over at once.
// A CA keeps its key across re-issues, and a certificate it signs depends on
// the CA's key and name only, so leaves chain to the old and the new CA.
//
// What no seed can fix, the clock and the cluster (now, ago, a date without
// a time, durationRound of a time, lookup, getHostByName), keeps Helm's
// behaviour and is recorded: Varying lists each use with its file, template
// and line, for one warning line.
//
// # What the seed protects
//
// Whoever has the seed and a chart can compute every password, private key,
// bcrypt salt and IV that chart generates for any release name and namespace.
// Without it the values are as unpredictable as crypto/rand's: no output,
// error or record holds the seed, a derived key or a counter. Guard it like a
// private key (mode 0600, a Kubernetes Secret, a CI secret); one seed per
// trust domain: whoever can render a chart of their choosing with a release
// name and namespace of their choosing under the same seed can reproduce
// another release's values. Rotating the seed rotates every generated value
// at once; losing it regenerates every value once.
//
// # Known limits
//
//   - Two equal calls (same function, arguments, line and context), and
//     the entries of a range over a list of mappings that have no name,
//     id or key field, take their values in the order they run; Ordered
//     lists each, for a warning line.
//   - A call's value changes when its line's text, its template's name or
//     its file's name changes (renaming a file; re-indenting is fine), or
//     when the line of an include, template or tpl call above it changes.
//   - A block action is not a frame: the calls in its body are told apart
//     by the block's name only.
//   - A rewritten line's columns move, so a Helm error's column on such a line
//     is off; its line is right. An error names the located function
//     (_dp_genCA); OriginalName maps it back.
//   - Certificate validity must be 1 to 100000 days: sprig would issue an
//     already expired certificate for 0 or fewer days, this is an error.
//     randInt with max <= min and randBytes with a negative count are errors
//     where sprig panics.
//   - now, ago and date keep varying; lookup returns an empty map without a
//     cluster (SetLookup for one); getHostByName returns "" as Helm does
//     without --enable-dns.
package detgen
