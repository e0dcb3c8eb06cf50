"""One check for the package's bilingual errors, shared by the modules' tables of bad arguments:
``from bilingual_errors import assert_refused``."""

import pytest


def assert_refused(call, lang: str, es: str, en: str) -> None:
    """``call()`` raises the course's ValueError in ``lang`` (the language already set), whose text holds ``es`` or
    ``en`` and is exactly that language's side of the message."""
    with pytest.raises(ValueError) as info:
        call()
    assert (es if lang == "es" else en) in str(info.value)
    assert str(info.value) == (info.value.es if lang == "es" else info.value.en)
