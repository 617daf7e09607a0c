// AlgName: a parsed algorithm name such as "essiv(cbc(aes),sha256)".
// Grammar:  name := base | base "(" name { "," name } ")"
//           base := 1*( ALPHA / DIGIT / "-" / "_" / "." / "+" )
// The whole name is at most kMaxAlgNameLen characters, no white space.
#pragma once

#include <blkcrypt/status.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace blkcrypt {

inline constexpr std::size_t kMaxAlgNameLen = 127;  // the kernel's CRYPTO_MAX_ALG_NAME less NUL

class AlgName {
public:
    static Result<AlgName> parse(std::string_view text);

    const std::string& base() const noexcept { return base_; }
    const std::vector<AlgName>& args() const noexcept { return args_; }
    bool is_template() const noexcept { return !args_.empty(); }
    std::string str() const;  // canonical form, e.g. "xts(aes)"

private:
    friend class AlgNameParser;
    std::string base_;
    std::vector<AlgName> args_;
};

}  // namespace blkcrypt
