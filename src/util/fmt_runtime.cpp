// fmt's compiled half (the functions format.h declares but does not define),
// built into oomplan instead of linked from libfmt.so: with the C++ runtime
// and yaml-cpp also linked in, start-up does no dynamic symbol lookups into
// libstdc++ (about 2 M instructions of ld.so's 2.7 M for --version).
#include <fmt/format-inl.h>

// The two templates of format-inl.h that format.h's inline code calls for
// char (the linker names them when they are missing).
FMT_BEGIN_NAMESPACE
namespace detail {
template auto decimal_point_impl(locale_ref) -> char;
template auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
}  // namespace detail
FMT_END_NAMESPACE
