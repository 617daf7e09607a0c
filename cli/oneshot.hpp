// What the one-shot transform commands (skcipher, aead) share: their options
// and the keyed transform they allocate before any input is read.
#pragma once

#include "common.hpp"
#include "registry.hpp"

#include <blkcrypt/registry.hpp>

#include <utility>

namespace cli {

// --alg, --key, --iv, --encrypt/--decrypt, --in, --out and --driver.
void add_oneshot_options(po::options_description& opts, const char* alg_help);

// --alg (or --driver) allocated and keyed with --key; usage errors throw.
template <class Tfm>
Tfm alloc_keyed(const po::variables_map& vm) {
    blkcrypt::Registry& reg = registry();
    auto tfm = Tfm::alloc(reg, name_to_alloc(reg, vm));
    if (!tfm) throw_alloc_error(tfm.error());
    const auto key = decode_secret_hex(vm["key"].as<std::string>(), "--key");
    if (tfm->setkey(key) != blkcrypt::Status::Ok) throw UsageError(key_rejected(tfm->info(), key.size()));
    return std::move(*tfm);
}

}  // namespace cli
