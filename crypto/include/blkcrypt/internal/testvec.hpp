// Known-answer test vectors: text files in crypto/vectors/, compiled into the
// library, keyed by generic algorithm name.
//
//   # Source: FIPS 197, Appendix C.1     <- comments; say where vectors came from
//   [aes]                                <- generic name the following vectors test
//   key   = 000102030405060708090a0b0c0d0e0f
//   ptext = 00112233445566778899aabbccddeeff
//   ctext = 69c4e0d86a7b0430d8cdb78070b4c55a
//                                        <- a blank line ends a vector
// Values are hex, or "quoted ASCII". Numbers (repeat, authsize) are decimal.
// Fields by type:
//   cipher, skcipher: key, iv, ptext, ctext, iv_out, setkey_fails; for
//                     IV-generation templates also sector_size,
//                     iv_large_sectors, key_count (SectorParams)
//   aead:             key, iv, assoc, ptext, ctext (ciphertext || tag), authsize, novrfy
//   shash, ahash:     key, msg, digest, repeat (msg is repeated this many times)
#pragma once

#include <blkcrypt/registry.hpp>
#include <blkcrypt/status.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace blkcrypt {

class Alg;

struct TestVector {
    std::string where;  // "aes.vec:12"
    std::map<std::string, std::string, std::less<>> fields;  // decoded bytes, as a string

    bool has(std::string_view k) const { return fields.count(k) > 0; }
    std::vector<uint8_t> bytes(std::string_view k) const;
    std::size_t number(std::string_view k, std::size_t dflt = 0) const;
};

struct VectorSet {
    std::string name;
    std::vector<TestVector> vectors;
};

// Parse one file's text. Errors name the file and line.
Result<std::vector<VectorSet>> parse_vector_file(std::string_view text, std::string_view file);

// The compiled-in vectors for this generic name (empty if none).
const std::vector<TestVector>& vectors_for(std::string_view generic_name);

// The vectors reg's self-tests use for this name: compiled-in, else added to
// reg with add_vectors (null if none). Shared: a plugin may remove its
// vectors while a self-test still runs on them.
std::shared_ptr<const std::vector<TestVector>> find_vectors(Registry& reg, std::string_view generic_name);

// Adds vectors (a plugin's own, in the format above) to reg only: another
// registry neither sees them nor is refused by them. Refused for a name
// that already has vectors in reg or compiled in. The same text from the
// same source may be added again (one more reference).
Result<void> add_vectors(Registry& reg, std::string_view text, std::string_view source);
// Drops one reference taken by add_vectors; the last one removes the sets
// (their plugin was refused or unloaded). They also go with reg.
void remove_vectors(Registry& reg, std::string_view text, std::string_view source);

// Runs vectors through alg as the registry's self-test does (each checked
// against alg's sizes first); the first failure names its vector. For tests
// and the .vec fuzz harness.
SelftestOutcome run_test_vectors(const Alg& alg, const std::vector<TestVector>& vecs, bool full);
// The registry's default self-test: alg's own vectors (by its test name,
// which only the library knows; compiled-in or added to reg), or NoVectors.
// For a Registry built with its own SelftestFn that defers to it (the fuzz
// harnesses).
SelftestOutcome run_testmgr(Registry& reg, const Alg& alg, bool full);

// Parse errors in the compiled-in files (a file that does not parse is
// skipped by vectors_for; the test suite asserts this list is empty).
std::vector<std::string> builtin_vector_errors();

// Every generic name that has compiled-in vectors.
std::vector<std::string> builtin_vector_names();

}  // namespace blkcrypt
