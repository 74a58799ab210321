"""What a model takes and gives, below both training and evaluation: a model folder checked and loaded with its
processor (``modeling.py``, ``model_folder.py``, ``attention.py``), a prompt encoded as the model sees it
(``chat_inputs.py``), what a training run recorded beside its weights (``run_record.py``), and an answer read back
from the text a model wrote (``answers.py``)."""
