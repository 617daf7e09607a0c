// blkcrypt list: the registered algorithms, in the layout and field order of
// the kernel's /proc/crypto (crypto/proc.c and each type's *_show function).
#include "commands.hpp"
#include "json.hpp"

#include <blkcrypt/registry.hpp>

#include <iostream>
#include <string>
#include <variant>
#include <vector>

namespace cli {
namespace {

struct Field {
    std::string label;  // as /proc/crypto spells it, e.g. "min keysize"
    std::variant<std::string, int64_t, bool> value;
};

int64_t num(std::size_t n) { return static_cast<int64_t>(n); }

std::vector<Field> fields_of(const blkcrypt::AlgStatus& st) {
    using blkcrypt::AlgType;
    const blkcrypt::AlgInfo& in = st.info;
    std::vector<Field> f = {
        {"name", in.name},
        {"driver", in.driver},
        {"module", in.module},
        {"priority", int64_t{in.priority}},
        {"refcnt", int64_t{st.refcnt}},
        {"selftest", std::string(to_string(st.selftest))},
        {"internal", false},  // /proc/crypto's label; no algorithm here is internal-only
    };
    if (st.superseded) f.push_back({"superseded", true});
    f.push_back({"type", std::string(to_string(in.type))});
    // Like the kernel, only the types that can be asynchronous say so.
    if (in.type == AlgType::Skcipher || in.type == AlgType::Aead || in.type == AlgType::Ahash)
        f.push_back({"async", in.async});
    f.push_back({"blocksize", num(in.blocksize)});
    switch (in.type) {
    case AlgType::Cipher:
        f.push_back({"min keysize", num(in.min_keysize)});
        f.push_back({"max keysize", num(in.max_keysize)});
        break;
    case AlgType::Skcipher:
        f.push_back({"min keysize", num(in.min_keysize)});
        f.push_back({"max keysize", num(in.max_keysize)});
        f.push_back({"ivsize", num(in.ivsize)});
        f.push_back({"chunksize", num(in.chunksize)});
        break;
    case AlgType::Aead:
        f.push_back({"ivsize", num(in.ivsize)});
        f.push_back({"maxauthsize", num(in.maxauthsize)});
        break;
    case AlgType::Shash:
    case AlgType::Ahash:
        f.push_back({"digestsize", num(in.digestsize)});
        f.push_back({"statesize", num(in.statesize)});
        break;
    }
    return f;
}

void print_text(const std::vector<blkcrypt::AlgStatus>& algs) {
    for (const auto& st : algs) {
        for (const auto& [label, value] : fields_of(st)) {
            std::string key = label;
            key.resize(13, ' ');
            std::cout << key << ": ";
            if (auto* s = std::get_if<std::string>(&value)) std::cout << *s;
            else if (auto* n = std::get_if<int64_t>(&value)) std::cout << *n;
            else std::cout << (std::get<bool>(value) ? "yes" : "no");
            std::cout << '\n';
        }
        std::cout << '\n';
    }
}

void print_json(const std::vector<blkcrypt::AlgStatus>& algs) {
    JsonWriter json(std::cout, JsonWriter::Indented);
    json.begin_array();
    for (const auto& st : algs) {
        json.begin_object();
        for (const auto& [label, value] : fields_of(st)) {
            std::string key = label;
            for (char& c : key)
                if (c == ' ') c = '_';
            json.key(key);
            if (auto* s = std::get_if<std::string>(&value)) json.string(*s);
            else if (auto* n = std::get_if<int64_t>(&value)) json.number(*n);
            else json.boolean(std::get<bool>(value));
        }
        json.end_object();
    }
    json.end_array();
}

}  // namespace

int run_list(Args args) {
    CommandLine cl{"blkcrypt list [--json]",
                   "Show every registered algorithm in the layout of /proc/crypto."};
    cl.options.add_options()("json", "print a JSON array of objects instead");
    auto vm = parse_command_line(cl, args);
    if (!vm) return 0;

    blkcrypt::Registry& reg = registry();
    // The registry tests an algorithm when it is first used, and in a fresh
    // process nothing has been. What this command is asked is the state, so it
    // uses each untested one (the quick test, as registration ran it before);
    // the kernel's /proc/crypto has its "unknown" for the same not-yet-tested case.
    for (const auto& st : reg.list())
        if (st.selftest == blkcrypt::SelftestState::Pending) (void)reg.lookup_any(st.info.driver);
    const auto algs = reg.list();
    if (vm->count("json")) print_json(algs);
    else print_text(algs);
    return 0;
}

}  // namespace cli
