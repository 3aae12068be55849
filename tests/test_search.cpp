#include "support.hpp"

#include <catch2/catch.hpp>
