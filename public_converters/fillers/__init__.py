"""The fillers of the public corpus's templates, one per template id: each reads an item's normalised annotations and
returns the cases and slot values to render (zero, one or several QAs per item). ``image`` fills the image branch's
templates (the Sureon paper's C.2, ``templates/image.yaml``), ``clip`` the clip branch's (C.3,
``templates/clip.yaml``); ``fill`` holds what both return and the fills they make alike."""
